"""The kubernetes execution backend against the simulated TauGrid cluster (fake clock)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tau_core import keys
from tau_core.backends.kubernetes import KubernetesBackend, safe_relative
from tau_core.errors import ConflictError, NotFoundError, TauError, UsageError
from tau_core.lifecycle.base import ArtifactListing, FailureReason, LogOptions, RunRef, SubmitRequest
from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of


def job(name: str, *, cpu: str = "1", image: str = "ghcr.io/acme/train:1.0", labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None, env: list[dict[str, Any]] | None = None,
        priority: str | None = None) -> dict[str, Any]:
    meta_labels = {keys.KUEUE_QUEUE_NAME: "jobqueue", keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                   keys.RUN_ID: name, **(labels or {})}
    if priority:
        meta_labels[keys.KUEUE_PRIORITY_CLASS] = priority
    pod_spec: dict[str, Any] = {"restartPolicy": "Never", "containers": [
        {"name": "main", "image": image, "env": env or [],
         "resources": {"requests": {"cpu": cpu, "memory": "1Gi"}, "limits": {"memory": "1Gi"}}}]}
    if priority:
        pod_spec["priorityClassName"] = priority
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": NAMESPACE, "labels": meta_labels,
                         "annotations": dict(annotations or {})},
            "spec": {"suspend": True, "backoffLimit": 0,
                     "template": {"metadata": {"labels": {"app": name}}, "spec": pod_spec}}}


def request(obj: dict[str, Any], submission_id: str = "a" * 24, **context: Any) -> SubmitRequest:
    return SubmitRequest(name=obj["metadata"]["name"], config={}, objects=[copy.deepcopy(obj)], context=context,
                         submission_id=submission_id)


@pytest.fixture
def grid(taugrid_cluster: TauGridScenario) -> tuple[TauGridScenario, KubernetesBackend]:
    backend = KubernetesBackend(kubeconfig=str(taugrid_cluster.kubeconfig), poll_interval=0.01)  # type: ignore[attr-defined]
    return taugrid_cluster, backend


def states(st: Any) -> dict[str, str]:
    return {p.name: p.state for p in st.phases}


def test_submit_status_logs_list_of_a_successful_job(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "ok"}, PodScript(pull_seconds=3, run_seconds=20,
                                                              logs=["epoch 1 loss=0.9", "epoch 2 loss=0.5"]))
    result = backend.submit(request(job("ok")))
    assert result.created and "submitted ok" in result.message
    assert backend.last_requests == 1  # preflight needs nothing for this Job: one create

    st = backend.status(RunRef("ok", namespace=NAMESPACE))
    assert backend.last_requests <= 6
    assert states(st)["Submitted"] == "done"
    assert states(st)["Kueue admission"] == "done"
    assert "1/1 admitted queue=jobqueue" in st.phases[1].detail
    assert states(st)["Image pull"] == "active"
    assert not st.terminal

    scenario.cluster.advance(30)
    st = backend.status(RunRef("ok", namespace=NAMESPACE))
    assert st.terminal and st.succeeded and st.failure is None
    assert all(p.state in ("done", "skipped") for p in st.phases)
    assert "quota released" in st.phases[1].detail

    assert list(backend.logs(RunRef("ok", namespace=NAMESPACE), LogOptions())) == [
        "epoch 1 loss=0.9", "epoch 2 loss=0.5"]
    assert list(backend.logs(RunRef("ok", namespace=NAMESPACE), LogOptions(tail=1))) == ["epoch 2 loss=0.5"]
    prefixed = list(backend.logs(RunRef("ok", namespace=NAMESPACE), LogOptions(prefix=True)))
    assert prefixed[0].startswith("[pod/ok-") and prefixed[0].endswith("/main] epoch 1 loss=0.9")

    rows = backend.list(namespace=NAMESPACE)
    assert [(r.ref.name, r.kind, r.state) for r in rows] == [("ok", "Job", "Succeeded")]


def test_namespace_comes_from_the_primary_workspace(grid) -> None:  # type: ignore[no-untyped-def]
    _, backend = grid
    backend.submit(request(job("found")))
    st = backend.status(RunRef("found"))
    assert st.ref.namespace == NAMESPACE and st.ref.workspace == "aurora"
    assert backend.last_requests <= 6


def test_retried_create_recovers_and_foreign_object_is_refused(grid) -> None:  # type: ignore[no-untyped-def]
    _, backend = grid
    first = backend.submit(request(job("same"), submission_id="1" * 24))
    again = backend.submit(request(job("same"), submission_id="1" * 24))
    assert first.created and not again.created
    assert "recovered" in again.message
    with pytest.raises(ConflictError) as err:
        backend.submit(request(job("same"), submission_id="2" * 24))
    assert "already exists from another submission" in err.value.message
    assert "tau run cancel same" in (err.value.hint or "")


def test_dropped_connection_after_create_submits_once(grid, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    monkeypatch.setenv("TAU_REQUEST_TIMEOUT", "0.4")
    fault = scenario.cluster.faults.latency(1.0, method="POST", path_regex="/jobs$", count=1)
    try:
        result = backend.submit(request(job("dropped"), submission_id="3" * 24))
    finally:
        fault.remove()
    jobs = [j for j in scenario.cluster.store.list("batch/v1", "Job", NAMESPACE) if j["metadata"]["name"] == "dropped"]
    assert len(jobs) == 1
    assert jobs[0]["metadata"]["annotations"][keys.SUBMISSION_ID] == "3" * 24
    assert result.ref.name == "dropped"


def test_missing_secret_is_refused_before_create(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    env = [{"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "hf-token", "key": "token"}}}]
    with pytest.raises(NotFoundError) as err:
        backend.submit(request(job("needs-secret", env=env)))
    assert "required Secret aurora/hf-token does not exist" in err.value.message
    assert scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "needs-secret") is None
    scenario.cluster.apply({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "hf-token",
                                                                              "namespace": NAMESPACE},
                            "data": {"token": "c2VjcmV0"}})
    assert backend.submit(request(job("needs-secret", env=env))).created


def test_missing_default_priority_classes_are_dropped_with_a_warning(grid, capsys) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scenario.cluster.store.delete("scheduling.k8s.io/v1", "PriorityClass", None, "taugrid-default")
    backend.submit(request(job("prio", priority="taugrid-default")))
    created = scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "prio")
    assert keys.KUEUE_PRIORITY_CLASS not in created["metadata"]["labels"]
    assert "priorityClassName" not in created["spec"]["template"]["spec"]
    assert "omitting Tau default priority classes" in capsys.readouterr().err


def test_server_dry_run_returns_the_defaulted_object_and_creates_nothing(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    objects = backend.server_dry_run(request(job("dry")))
    assert objects[0]["metadata"]["name"] == "dry"
    assert objects[0]["metadata"].get("uid")
    assert scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "dry") is None


def test_pending_on_quota_explains_why(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    backend.submit(request(job("big", cpu="500")))
    scenario.cluster.advance(5)
    st = backend.status(RunRef("big", namespace=NAMESPACE))
    admission = st.phases[1]
    assert admission.state == "active"
    assert "0/1 admitted queue=jobqueue" in admission.detail
    assert "insufficient" in admission.detail and "quota" in admission.detail
    assert admission.hint and "capacity" in admission.hint
    assert states(st)["Pod scheduling"] == "pending"


def test_image_pull_failure_is_a_warning_with_a_hint(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "badimg"}, PodScript(pull_error="ImagePullBackOff"))
    backend.submit(request(job("badimg", image="ghcr.io/acme/missing:9")))
    scenario.cluster.advance(10)
    st = backend.status(RunRef("badimg", namespace=NAMESPACE))
    pull = next(p for p in st.phases if p.name == "Image pull")
    assert pull.state == "warning"
    assert "ImagePullBackOff" in pull.detail
    assert "registry credentials" in (pull.hint or "")


@pytest.mark.parametrize(("script", "reason"), [
    (PodScript(run_seconds=3, oom=True), FailureReason.OOM_KILLED),
    (PodScript(run_seconds=30, preempt_after=3), FailureReason.PREEMPTED),
    (PodScript(run_seconds=30, evict_after=3), FailureReason.EVICTED),
    (PodScript(run_seconds=3, exit_code=2), FailureReason.UNKNOWN),
])
def test_failures_are_classified(grid, script: PodScript, reason: FailureReason) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    name = "f-" + reason.value.lower()
    scripts_of(scenario.cluster).add({"app": name}, script)
    backend.submit(request(job(name)))
    scenario.cluster.advance(40)
    st = backend.status(RunRef(name, namespace=NAMESPACE))
    assert st.terminal and not st.succeeded
    assert st.failure is reason
    assert any(p.state == "warning" for p in st.phases)


def test_cancel_deletes_the_job_and_waits_for_teardown(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "long"}, PodScript(run_seconds=None))
    backend.submit(request(job("long")))
    scenario.cluster.advance(5)
    message = backend.cancel(RunRef("long", namespace=NAMESPACE), wait=True, timeout=10)
    assert "cancelled aurora/long" in message
    assert scenario.cluster.store.get("batch/v1", "Job", NAMESPACE, "long") is None
    with pytest.raises(NotFoundError):
        backend.cancel(RunRef("long", namespace=NAMESPACE))


def test_unknown_run_is_reported(grid) -> None:  # type: ignore[no-untyped-def]
    _, backend = grid
    st = backend.status(RunRef("ghost", namespace=NAMESPACE))
    assert not st.extra.exists
    assert st.phases[0].state == "pending" and "no batch/v1 Job or RayJob found" in st.phases[0].detail
    with pytest.raises(NotFoundError):
        list(backend.logs(RunRef("ghost", namespace=NAMESPACE), LogOptions()))


def _with_results(scenario: TauGridScenario, name: str, *, staged: str | None = None) -> dict[str, Any]:
    ann = {keys.RESULT_PATH: f"/data/runs/{name}", keys.RESULT_PVC: "blob-training"}
    if staged:
        ann[keys.ARTIFACT_PUBLICATION] = "staged"
        ann[keys.ARTIFACT_PUBLICATION_ID] = staged
    return job(name, annotations=ann)


def test_get_lists_and_fetches_artifacts_through_a_helper_pod(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scenario.write("runs/res/metrics/final.json", '{"loss": 0.1}\n')
    scenario.write("runs/res/model.bin", b"\x00\x01weights")
    backend.submit(request(_with_results(scenario, "res")))
    listing = backend.get(RunRef("res", namespace=NAMESPACE))
    assert isinstance(listing, ArtifactListing)
    assert [e["path"] for e in listing.entries] == ["metrics/final.json", "model.bin"]
    assert backend.get(RunRef("res", namespace=NAMESPACE), "metrics/final.json") == b'{"loss": 0.1}\n'
    assert backend.get(RunRef("res", namespace=NAMESPACE), "model.bin") == b"\x00\x01weights"
    helpers = [p for p in scenario.cluster.store.list("v1", "Pod", NAMESPACE)
               if p["metadata"]["name"].startswith("tau-get-") and not p["metadata"].get("deletionTimestamp")]
    assert helpers == []
    with pytest.raises(NotFoundError):
        backend.get(RunRef("res", namespace=NAMESPACE), "metrics/missing.json")


def test_get_refuses_symlinks_on_the_volume(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scenario.write("secret.txt", "top secret")
    (scenario.volume / "runs" / "lnk").mkdir(parents=True)
    (scenario.volume / "runs" / "lnk" / "leak.txt").symlink_to(scenario.volume / "secret.txt")
    backend.submit(request(_with_results(scenario, "lnk")))
    with pytest.raises(UsageError) as err:
        backend.get(RunRef("lnk", namespace=NAMESPACE), "leak.txt")
    assert "symbolic link" in err.value.message


@pytest.mark.parametrize("hostile", ["../secret.txt", "/etc/passwd", "a/../../b.txt", "x\x00.txt",
                                     "link -> /etc/passwd", "..", "C:\\x.txt", "", "a/\nb.txt"])
def test_hostile_artifact_paths_are_refused_before_anything_is_created(grid, hostile: str) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    before = len(scenario.cluster.requests.entries)
    with pytest.raises(UsageError):
        backend.get(RunRef("res", namespace=NAMESPACE), hostile)
    assert len(scenario.cluster.requests.entries) == before


def test_staged_publication_needs_its_completion_marker(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    pub = "c" * 24
    backend.submit(request(_with_results(scenario, "staged", staged=pub)))
    with pytest.raises(NotFoundError) as err:
        backend.get(RunRef("staged", namespace=NAMESPACE))
    assert "not published yet" in err.value.message
    scenario.write(f"runs/staged/.tau-artifacts/{pub}/report.txt", "done\n")
    scenario.write(f"runs/staged/.tau-artifacts/{pub}/.tau-artifacts-complete", f"complete {pub}\n")
    listing = backend.get(RunRef("staged", namespace=NAMESPACE))
    assert isinstance(listing, ArtifactListing)
    assert "report.txt" in [e["path"] for e in listing.entries]
    assert backend.get(RunRef("staged", namespace=NAMESPACE), "report.txt") == b"done\n"


def test_get_with_explicit_path_and_pvc(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scenario.write("old/results/out.txt", "42\n")
    assert backend.get(RunRef("deleted-run", namespace=NAMESPACE), "out.txt", path="/data/old/results",
                       pvc="blob-training") == b"42\n"
    with pytest.raises(UsageError):
        backend.get(RunRef("deleted-run", namespace=NAMESPACE), path="/data/old/results")


def test_safe_relative_normalizes() -> None:
    assert safe_relative("a/./b.txt") == "a/b.txt"
    with pytest.raises(UsageError):
        safe_relative("a/b/../../../c")


def test_forbidden_user_gets_a_clear_error(taugrid_factory) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(user="outsider")
    backend = KubernetesBackend(kubeconfig=str(scenario.kubeconfig))
    with pytest.raises(TauError) as err:
        backend.submit(request(job("nope")))
    assert "forbidden: you may not create jobs.batch in namespace \"aurora\"" in err.value.message
    assert "platform team" in (err.value.hint or "")


def test_run_profile_reports_queue_runtime_and_unavailable_gpu_telemetry(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "prof"}, PodScript(run_seconds=100))
    backend.submit(request(job("prof")))
    scenario.cluster.advance(5)
    st = backend.status(RunRef("prof", namespace=NAMESPACE), run_profile=True)
    profile = st.extra.run_profile
    assert profile["queue"]["localQueue"] == "jobqueue"
    assert profile["queue"]["clusterQueue"] == "tau-cq"
    assert profile["queue"]["flavors"]["cpu"] == "taugrid-default-cpu"
    assert profile["runtime"][0]["node"] and profile["runtime"][0]["phase"] == "Running"
    assert profile["gpu_runtime"]["state"] == "unavailable"
    assert "cluster-wide pod read access" in profile["gpu_runtime"]["reason"]


def test_dcgm_metrics_are_parsed() -> None:
    from tau_core.run_profile import parse_metrics

    text = ('# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization.\n'
            'DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-1",pod="p",namespace="aurora",container="main"} 87\n'
            'DCGM_FI_DEV_FB_USED{gpu="0",pod="p",namespace="aurora"} 2048\n')
    samples = parse_metrics(text)
    assert samples[0] == ("DCGM_FI_DEV_GPU_UTIL", {"gpu": "0", "UUID": "GPU-1", "pod": "p", "namespace": "aurora",
                                                   "container": "main"}, 87.0)
    assert samples[1][2] == 2048.0


def test_log_options_containers_timestamps_and_previous(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "multi"}, PodScript(
        run_seconds=30, logs={"main": ["main line"], "sidecar": ["side line"], "setup": ["init line"]}))
    obj = job("multi")
    spec = obj["spec"]["template"]["spec"]
    spec["initContainers"] = [{"name": "setup", "image": "busybox:1", "resources": {"requests": {"cpu": "10m"}}}]
    spec["containers"].append({"name": "sidecar", "image": "busybox:1", "resources": {"requests": {"cpu": "10m"}}})
    backend.submit(request(obj))
    scenario.cluster.advance(10)
    ref = RunRef("multi", namespace=NAMESPACE)
    assert list(backend.logs(ref, LogOptions())) == ["main line"]
    assert list(backend.logs(ref, LogOptions(container="setup"))) == ["init line"]
    everything = list(backend.logs(ref, LogOptions(all_containers=True, prefix=True)))
    assert [line.rsplit("] ", 1)[1] for line in everything] == ["init line", "main line", "side line"]
    assert all(line.startswith("[pod/multi-") for line in everything)
    stamped = list(backend.logs(ref, LogOptions(timestamps=True)))
    assert stamped[0].endswith(" main line") and stamped[0][:4].isdigit()
    with pytest.raises(NotFoundError) as err:
        list(backend.logs(ref, LogOptions(container="nope")))
    assert "containers: setup, main, sidecar" in (err.value.hint or "")


def test_previous_container_instance(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    calls = {"n": 0}

    def lines(pod: dict[str, Any], container: str) -> list[str]:
        calls["n"] += 1
        return [f"run {calls['n']}"]

    scripts_of(scenario.cluster).add({"app": "restarts"}, PodScript(run_seconds=3, exit_code=1, logs=lines))
    obj = job("restarts")
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    obj["spec"]["backoffLimit"] = 5
    backend.submit(request(obj))
    scenario.cluster.advance(30)
    ref = RunRef("restarts", namespace=NAMESPACE)
    current = list(backend.logs(ref, LogOptions()))
    previous = list(backend.logs(ref, LogOptions(previous=True)))
    assert current and previous and current != previous


def test_unschedulable_pod_is_a_scheduling_warning(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    obj = job("nowhere")  # admitted on the CPU flavor, but no node carries the extra label
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"agentpool": "cpu", "disk": "nvme"}
    backend.submit(request(obj))
    scenario.cluster.advance(10)
    st = backend.status(RunRef("nowhere", namespace=NAMESPACE))
    scheduling = next(p for p in st.phases if p.name == "Pod scheduling")
    assert scheduling.state == "warning", st.phases
    assert "0/1 assigned to nodes" in scheduling.detail
    assert "node selectors" in (scheduling.hint or "")


def test_crashing_container_is_a_start_warning(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "crash"}, PodScript(run_seconds=1, exit_code=1))
    obj = job("crash")
    obj["spec"]["template"]["spec"]["restartPolicy"] = "OnFailure"
    obj["spec"]["backoffLimit"] = 6
    backend.submit(request(obj))
    scenario.cluster.advance(60)
    st = backend.status(RunRef("crash", namespace=NAMESPACE))
    start = next(p for p in st.phases if p.name == "Container start")
    assert start.state == "warning", st.phases
    assert "exited 1" in start.detail or "CrashLoopBackOff" in start.detail


def test_flavor_mismatch_is_explained_at_admission(grid) -> None:  # type: ignore[no-untyped-def]
    scenario, backend = grid
    obj = job("mismatch")
    obj["spec"]["template"]["spec"]["nodeSelector"] = {"agentpool": "does-not-exist"}
    backend.submit(request(obj))
    scenario.cluster.advance(5)
    admission = backend.status(RunRef("mismatch", namespace=NAMESPACE)).phases[1]
    assert admission.state == "active" and "doesn't match node affinity" in admission.detail
    assert "ResourceFlavor" in (admission.hint or "")


def test_backend_works_inside_a_running_event_loop(grid) -> None:  # type: ignore[no-untyped-def]
    """A notebook or an async host: status and logs still work."""
    import asyncio

    scenario, backend = grid
    scripts_of(scenario.cluster).add({"app": "nb"}, PodScript(run_seconds=2, logs=["from a notebook"]))

    async def notebook() -> tuple[bool, list[str]]:
        backend.submit(request(job("nb")))
        scenario.cluster.advance(5)
        st = backend.status(RunRef("nb", namespace=NAMESPACE))
        return st.succeeded, list(backend.logs(RunRef("nb", namespace=NAMESPACE), LogOptions()))

    assert asyncio.run(notebook()) == (True, ["from a notebook"])
