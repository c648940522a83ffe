"""The process kubelet: pods' commands run as real local processes (logs, exit codes, OOM, env, volumes, kill)."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tau_testing.sim.controllers import add_node, kit
from tau_testing.sim.kubelet_process import enable_process_kubelet
from tau_testing.sim.process_spec import PathMapper, expand

WAIT = 60.0  # the machine is shared and loaded: generous, never asserted as a duration


@pytest.fixture
def cluster(sim_cluster_factory: Any, tmp_path: Path) -> Any:
    c = sim_cluster_factory(tls=True)  # kubectl sends bearer tokens over TLS only
    add_node(c, "node-1", cpu="8", memory="32Gi")
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    enable_process_kubelet(c, root=tmp_path / "kubelet", max_grace=5)
    return c


def _job(name: str, script: str, **container: Any) -> dict[str, Any]:
    job = kit.job(name, queue=None, backoff_limit=0)
    main = job["spec"]["template"]["spec"]["containers"][0]
    main["command"] = ["sh", "-c", script]
    main.update(container)
    return job


def _pod(cluster: Any, job: str) -> dict[str, Any] | None:
    pods = cluster.store.list("v1", "Pod", "team", label_selector=f"job-name={job}")
    return pods[0] if pods else None


def _terminal(cluster: Any, job: str) -> dict[str, Any]:
    def done() -> dict[str, Any] | None:
        pod = _pod(cluster, job)
        return pod if pod and pod["status"].get("phase") in ("Succeeded", "Failed") else None

    return cluster.wait_for(done, timeout=WAIT)  # type: ignore[no-any-return]


def _terminated(pod: dict[str, Any], index: int = 0) -> dict[str, Any]:
    return pod["status"]["containerStatuses"][index]["state"]["terminated"]  # type: ignore[no-any-return]


def test_exit_code_and_logs_reach_kubectl(cluster: Any, kubectl_bin: Path, tmp_path: Path) -> None:
    cluster.store.create(_job("echo", 'echo "hello from $HOSTNAME"; echo "to stderr" >&2; exit 3'))
    pod = _terminal(cluster, "echo")
    assert pod["status"]["phase"] == "Failed"
    state = _terminated(pod)
    assert (state["exitCode"], state["reason"]) == (3, "Error")
    name = pod["metadata"]["name"]
    env = {**os.environ, "HOME": str(tmp_path), "KUBECONFIG": str(cluster.kubeconfig_path)}
    proc = subprocess.run([str(kubectl_bin), "--context", cluster.context_for("admin"), "logs", "-n", "team", name], capture_output=True, text=True, env=env,
                         timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout.splitlines()
    # stdout and stderr are two pipes read by two threads, as a container runtime reads two streams: the order
    # within a stream is kept, the interleaving across them is not promised (nor is it by a real kubelet)
    assert sorted(out) == sorted([f"hello from {name}", "to stderr"])
    job = cluster.wait_for(lambda: kit.condition(cluster.store.get("batch/v1", "Job", "team", "echo"), "Failed"),
                           timeout=WAIT)
    assert job["reason"] == "BackoffLimitExceeded"


def test_success_completes_the_job(cluster: Any) -> None:
    cluster.store.create(_job("ok", "echo done"))
    pod = _terminal(cluster, "ok")
    assert (pod["status"]["phase"], _terminated(pod)["reason"], _terminated(pod)["exitCode"]) == \
        ("Succeeded", "Completed", 0)
    assert cluster.wait_for(lambda: kit.condition(cluster.store.get("batch/v1", "Job", "team", "ok"), "Complete"),
                            timeout=WAIT)


def test_memory_limit_kills_with_oom(cluster: Any) -> None:
    grow = f"{sys.executable} -c \"import time; b = b'x' * (256 * 1024 * 1024); time.sleep(30)\""
    cluster.store.create(_job("hungry", grow, resources={"limits": {"memory": "64Mi"}}))
    pod = _terminal(cluster, "hungry")
    assert (_terminated(pod)["reason"], _terminated(pod)["exitCode"]) == ("OOMKilled", 137)
    assert pod["status"]["phase"] == "Failed"


def test_env_from_values_secrets_configmaps_and_fields(cluster: Any) -> None:
    cluster.store.create({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "creds", "namespace": "team"},
                          "data": {"token": base64.b64encode(b"s3cret").decode()}})
    cluster.store.create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "cfg", "namespace": "team"},
                          "data": {"mode": "fast"}})
    env = [{"name": "PLAIN", "value": "one"}, {"name": "DERIVED", "value": "$(PLAIN)-two"},
           {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
           {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "cfg", "key": "mode"}}},
           {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]
    script = 'echo "$PLAIN $DERIVED $TOKEN $MODE $POD"; echo "host-only=${TAU_SIM_HOST_ONLY:-unset}"'
    os.environ["TAU_SIM_HOST_ONLY"] = "leak"
    try:
        cluster.store.create(_job("env", script, env=env))
        pod = _terminal(cluster, "env")
    finally:
        del os.environ["TAU_SIM_HOST_ONLY"]
    lines = cluster.logs.read("team", pod["metadata"]["name"], "main")
    assert lines == [f"one one-two s3cret fast {pod['metadata']['name']}", "host-only=unset"]


def test_volumes_emptydir_between_containers_and_pvc_across_pods(cluster: Any, tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    cluster.process_kubelet.roots.claims = {"team/results": claim}
    volumes = [{"name": "scratch", "emptyDir": {}},
               {"name": "data", "persistentVolumeClaim": {"claimName": "results"}}]
    mounts = [{"name": "scratch", "mountPath": "/scratch"}, {"name": "data", "mountPath": "/data"}]
    init = [{"name": "prepare", "image": "busybox:1.36", "command": ["sh", "-c", "echo staged > /scratch/x"],
             "volumeMounts": mounts}]
    writer = kit.job("writer", queue=None, init_containers=init)
    spec = writer["spec"]["template"]["spec"]
    spec["volumes"] = volumes
    spec["containers"][0].update(command=["sh", "-c", "cat /scratch/x > /data/out.txt; echo at $TAU_DIR"],
                                 volumeMounts=mounts, env=[{"name": "TAU_DIR", "value": "/data/out.txt"}])
    cluster.store.create(writer)
    pod = _terminal(cluster, "writer")
    assert pod["status"]["phase"] == "Succeeded"
    assert (claim / "out.txt").read_text() == "staged\n"
    assert cluster.logs.read("team", pod["metadata"]["name"], "main") == [f"at {claim}/out.txt"]
    reader = _job("reader", "cat /data/out.txt", volumeMounts=[mounts[1]])
    reader["spec"]["template"]["spec"]["volumes"] = [volumes[1]]
    cluster.store.create(reader)
    pod = _terminal(cluster, "reader")
    assert cluster.logs.read("team", pod["metadata"]["name"], "main") == ["staged"]


def test_deleting_a_pod_terminates_its_process(cluster: Any, tmp_path: Path) -> None:
    marker = tmp_path / "claim"
    cluster.process_kubelet.roots.claims = {"results": marker}
    script = ("trap 'echo got-term > /data/term; exit 0' TERM; echo $$$$ > /data/pid; "  # $$ is an escaped $ in a pod command
              "while :; do sleep 0.1; done")
    job = _job("sleeper", script, volumeMounts=[{"name": "data", "mountPath": "/data"}])
    job["spec"]["template"]["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "results"}}]
    cluster.store.create(job)
    cluster.wait_for(lambda: (marker / "pid").exists() and (marker / "pid").read_text().strip(), timeout=WAIT)
    pod = _pod(cluster, "sleeper")
    assert pod is not None and pod["status"]["phase"] == "Running"
    assert pod["status"]["containerStatuses"][0]["state"].get("running")
    pid = int((marker / "pid").read_text())
    cluster.store.delete("v1", "Pod", "team", pod["metadata"]["name"])
    cluster.settle()
    cluster.wait_for(lambda: (marker / "term").exists(), timeout=WAIT)
    assert (marker / "term").read_text() == "got-term\n"
    cluster.wait_for(lambda: not Path(f"/proc/{pid}").exists() or "Z" in _proc_state(pid), timeout=WAIT)


def _proc_state(pid: int) -> str:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return "Z"
    return text[text.rindex(")") + 2]


def test_pods_without_a_command_stay_scripted(cluster: Any) -> None:
    cluster.store.create(kit.job("scripted", queue=None))
    cluster.advance(5)  # the scripted kubelet follows the fake clock
    pod = _terminal(cluster, "scripted")
    assert pod["status"]["phase"] == "Succeeded"
    assert cluster.logs.read("team", pod["metadata"]["name"], "main")[0].startswith("main: starting in pod")
    assert not cluster.process_kubelet.runs


def test_path_mapping_and_expansion() -> None:
    mapper = PathMapper({"/data": Path("/h/claim"), "/tau-pvc": Path("/h/p")})
    assert mapper.rewrite("cd /data/x && ls /database /tau-pvc/data file:///data") == \
        "cd /h/claim/x && ls /database /h/p/data file:///h/claim"
    assert expand("$(A)-$$(A)-$(B)", {"A": "1"}) == "1-$(A)-$(B)"


def test_a_process_that_ignores_sigterm_is_killed_after_the_grace_period(cluster: Any, tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    cluster.process_kubelet.roots.claims = {"results": claim}
    script = "trap 'echo ignoring > /data/term' TERM; echo $$$$ > /data/pid; while :; do sleep 0.1; done"
    job = _job("stubborn", script, volumeMounts=[{"name": "data", "mountPath": "/data"}])
    spec = job["spec"]["template"]["spec"]
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "results"}}]
    spec["terminationGracePeriodSeconds"] = 1
    cluster.store.create(job)
    cluster.wait_for(lambda: (claim / "pid").exists() and (claim / "pid").read_text().strip(), timeout=WAIT)
    pid = int((claim / "pid").read_text())
    pod = _pod(cluster, "stubborn")
    assert pod is not None
    cluster.store.delete("v1", "Pod", "team", pod["metadata"]["name"])
    cluster.settle()
    cluster.wait_for(lambda: (claim / "term").exists(), timeout=WAIT)  # it got SIGTERM and carried on
    cluster.wait_for(lambda: _proc_state(pid) == "Z", timeout=WAIT)  # then SIGKILL after one second


def test_on_failure_restarts_keep_the_previous_log(cluster: Any, tmp_path: Path) -> None:
    claim = tmp_path / "claim"
    cluster.process_kubelet.roots.claims = {"results": claim}
    # fails the first time, succeeds the second (the marker survives on the claim)
    script = "if [ -e /data/once ]; then echo second; exit 0; fi; touch /data/once; echo first; exit 1"
    job = kit.job("flaky", queue=None, restart_policy="OnFailure", backoff_limit=3)
    spec = job["spec"]["template"]["spec"]
    spec["containers"][0].update(command=["sh", "-c", script], volumeMounts=[{"name": "data", "mountPath": "/data"}])
    spec["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "results"}}]
    cluster.store.create(job)

    def succeeded() -> dict[str, Any] | None:
        cluster.settle()  # a restart waits a real second, then the next reconcile starts it
        pod = _pod(cluster, "flaky")
        return pod if pod and pod["status"].get("phase") == "Succeeded" else None

    pod = cluster.wait_for(succeeded, timeout=WAIT, interval=0.2)
    st = pod["status"]["containerStatuses"][0]
    assert st["restartCount"] == 1 and st["lastState"]["terminated"]["exitCode"] == 1
    name = pod["metadata"]["name"]
    assert cluster.logs.read("team", name, "main") == ["second"]
    assert cluster.logs.read("team", name, "main", previous=True) == ["first"]


@pytest.mark.parametrize(("script", "phase"), [("echo main done", "Succeeded"), ("exit 4", "Failed")])
def test_a_native_sidecar_runs_beside_main_and_never_holds_the_pod(cluster: Any, tmp_path: Path, script: str,
                                                                    phase: str) -> None:
    """An init container with restartPolicy Always starts before main, keeps running, and is stopped (SIGTERM)
    once main ends; the pod's phase is main's alone (Kubernetes' native sidecars)."""
    marker = tmp_path / f"sidecar-{phase}"
    # main waits for what the sidecar writes (as the rendered wrapper waits for the offload sidecar's ready file)
    job = _job(f"side-{phase.lower()}", f'while ! test -f "{marker}.started"; do sleep 0.05; done; {script}')
    job["spec"]["template"]["spec"]["initContainers"] = [{
        "name": "sidecar", "image": "busybox", "restartPolicy": "Always",
        "command": ["sh", "-c", f'trap "touch {marker}.stopped; exit 0" TERM; touch "{marker}.started"; '
                                "while true; do sleep 0.1; done"]}]
    cluster.store.create(job)
    pod = _terminal(cluster, f"side-{phase.lower()}")
    assert pod["status"]["phase"] == phase
    assert _terminated(pod)["exitCode"] == (0 if phase == "Succeeded" else 4)  # main ran beside the sidecar
    cluster.wait_for(lambda: Path(f"{marker}.stopped").exists(), timeout=WAIT)
