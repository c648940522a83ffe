"""Kubelet simulation: pod scripts, container statuses, conditions, events and logs."""

from __future__ import annotations

import re

import pytest

from tau_testing.sim import SimCluster
from tau_testing.sim.controllers import add_node, install_default_controllers, kit
from tau_testing.sim.controllers.events import for_object, reasons
from tau_testing.sim.scripts import PodScript, ScriptBook, scripts_of


@pytest.fixture
def cluster() -> SimCluster:
    c = SimCluster(clock="fake")
    install_default_controllers(c)
    add_node(c, "node-1", cpu="8", memory="32Gi")
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    return c


def _pod(cluster: SimCluster, job: str) -> dict:
    (pod,) = cluster.store.list("v1", "Pod", "team", label_selector=f"job-name={job}")
    return pod


def _state(pod: dict, index: int = 0) -> dict:
    return pod["status"]["containerStatuses"][index]["state"]


def test_pull_init_run_and_logs_follow_the_script(cluster: SimCluster) -> None:
    scripts_of(cluster).add("^staged-", PodScript(pull_seconds=3, init_seconds=2, run_seconds=5,
                                                  logs=["step 1", "step 2", "step 3", "step 4", "step 5"]))
    init = [{"name": "prepare", "image": "busybox:1.36"}]
    cluster.store.create(kit.job("staged", queue=None, init_containers=init))
    cluster.settle()
    pod = _pod(cluster, "staged")
    assert pod["status"]["phase"] == "Pending"
    assert _state(pod) == {"waiting": {"reason": "PodInitializing"}}
    assert kit.condition(pod, "Initialized")["status"] == "False"
    assert kit.condition(pod, "Initialized")["message"] == "containers with incomplete status: [prepare]"

    cluster.advance(4)  # pulled at 3 s, init running
    pod = _pod(cluster, "staged")
    assert "running" in pod["status"]["initContainerStatuses"][0]["state"]
    cluster.advance(2)  # init done at 5 s, main running
    pod = _pod(cluster, "staged")
    assert pod["status"]["phase"] == "Running"
    assert _state(pod)["running"]["startedAt"] == "2026-01-01T00:00:05Z"
    assert pod["status"]["initContainerStatuses"][0]["state"]["terminated"]["reason"] == "Completed"
    assert kit.condition(pod, "Ready")["status"] == "True"

    cluster.advance(10)
    pod = _pod(cluster, "staged")
    assert pod["status"]["phase"] == "Succeeded"
    term = _state(pod)["terminated"]
    assert (term["exitCode"], term["reason"], term["finishedAt"]) == (0, "Completed", "2026-01-01T00:00:10Z")
    assert kit.condition(pod, "Ready")["reason"] == "PodCompleted"
    lines = cluster.logs.read("team", pod["metadata"]["name"], "main", timestamps=True)
    assert [line.split(" ", 1)[1] for line in lines] == ["step 1", "step 2", "step 3", "step 4", "step 5"]
    assert [line[:19] for line in lines] == [f"2026-01-01T00:00:{s:02d}" for s in (5, 6, 7, 8, 9)]
    evs = [(e["reason"], e["message"]) for e in for_object(cluster, pod)]
    assert ("Pulling", 'Pulling image "busybox:1.36"') in evs
    assert ("Pulled", 'Successfully pulled image "busybox:1.36" in 3s (3s including waiting). Image size: '
            + evs[[r for r, _ in evs].index("Pulled")][1].split("Image size: ")[1]) in evs
    assert ("Started", "Started container prepare") in evs and ("Started", "Started container main") in evs
    pulled = next(e for e in for_object(cluster, pod) if e["reason"] == "Pulled")
    assert pulled["firstTimestamp"] == "2026-01-01T00:00:03Z"
    assert pulled["source"] == {"component": "kubelet", "host": "node-1"}


def test_one_big_step_matches_many_small_steps() -> None:
    def run(steps: list[float]) -> tuple[dict, list[str]]:
        c = SimCluster(clock="fake")
        install_default_controllers(c)
        add_node(c, "node-1")
        c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
        scripts_of(c).add({}, PodScript(pull_seconds=2, run_seconds=4, log_every=1, logs=[f"l{i}" for i in range(4)]))
        c.store.create(kit.job("j", queue=None))
        for step in steps:
            c.advance(step)
        pod = c.store.list("v1", "Pod", "team")[0]
        return pod["status"], c.logs.read("team", pod["metadata"]["name"], "main", timestamps=True)

    assert run([30]) == run([1] * 30)


def test_image_pull_failure_backs_off(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "bad-image"}, PodScript(pull_seconds=2, pull_error="ErrImagePull"))
    cluster.store.create(kit.job("bad-image", queue=None, image="registry.example/missing:v1"))
    cluster.advance(3)
    pod = _pod(cluster, "bad-image")
    assert pod["status"]["phase"] == "Pending"
    assert _state(pod)["waiting"]["reason"] == "ErrImagePull"
    cluster.advance(20)
    pod = _pod(cluster, "bad-image")
    assert _state(pod)["waiting"] == {"reason": "ImagePullBackOff",
                                      "message": 'Back-off pulling image "registry.example/missing:v1"'}
    evs = [(e["type"], e["reason"], e["message"]) for e in for_object(cluster, pod)]
    assert ("Warning", "Failed", "Error: ErrImagePull") in evs
    assert ("Warning", "Failed", "Error: ImagePullBackOff") in evs
    assert ("Normal", "BackOff", 'Back-off pulling image "registry.example/missing:v1"') in evs
    failed = [m for t, r, m in evs if r == "Failed" and m.startswith("Failed to pull image")]
    assert failed and "not found" in failed[0]
    job = cluster.store.get("batch/v1", "Job", "team", "bad-image")
    assert job["status"]["active"] == 1 and kit.condition(job, "Complete") is None


def test_invalid_image_name(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "typo"}, PodScript(pull_error="InvalidImageName"))
    cluster.store.create(kit.job("typo", queue=None, image="Busy Box"))
    cluster.settle()
    pod = _pod(cluster, "typo")
    assert _state(pod)["waiting"]["reason"] == "InvalidImageName"
    assert "Error: InvalidImageName" in [e["message"] for e in for_object(cluster, pod)]


def test_oom_killed(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "hungry"}, PodScript(run_seconds=3, oom=True))
    cluster.store.create(kit.job("hungry", queue=None, backoff_limit=0))
    cluster.advance(5)
    pod = _pod(cluster, "hungry")
    assert pod["status"]["phase"] == "Failed"
    term = _state(pod)["terminated"]
    assert (term["exitCode"], term["reason"]) == (137, "OOMKilled")
    job = cluster.store.get("batch/v1", "Job", "team", "hungry")
    assert kit.condition(job, "Failed")["reason"] == "BackoffLimitExceeded"


def test_non_zero_exit_is_an_error(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "crash"}, PodScript(run_seconds=1, exit_code=3, logs=["Traceback: boom"]))
    cluster.store.create(kit.job("crash", queue=None, backoff_limit=1))
    cluster.advance(5)
    pods = cluster.store.list("v1", "Pod", "team", label_selector="job-name=crash")
    assert len(pods) == 2  # one retry under backoffLimit 1
    assert all(p["status"]["phase"] == "Failed" for p in pods)
    assert {_state(p)["terminated"]["reason"] for p in pods} == {"Error"}
    assert {_state(p)["terminated"]["exitCode"] for p in pods} == {3}
    job = cluster.store.get("batch/v1", "Job", "team", "crash")
    assert job["status"]["failed"] == 2
    assert kit.condition(job, "Failed")["message"] == "Job has reached the specified backoff limit"
    assert "BackoffLimitExceeded" in reasons(cluster, job)


def test_evicted_pod(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "evictee"}, PodScript(run_seconds=60, evict_after=5))
    cluster.store.create(kit.job("evictee", queue=None, backoff_limit=0))
    cluster.advance(10)
    pod = _pod(cluster, "evictee")
    assert pod["status"]["phase"] == "Failed"
    assert pod["status"]["reason"] == "Evicted"
    assert pod["status"]["message"].startswith("The node was low on resource: memory.")
    target = kit.condition(pod, "DisruptionTarget")
    assert (target["status"], target["reason"]) == ("True", "TerminationByKubelet")
    assert target["lastTransitionTime"] == "2026-01-01T00:00:05Z"
    evicted = [e for e in for_object(cluster, pod) if e["reason"] == "Evicted"]
    assert evicted and evicted[0]["type"] == "Warning"
    assert "Killing" in reasons(cluster, pod)
    assert _state(pod)["terminated"]["exitCode"] == 137


def test_scheduler_preemption_script(cluster: SimCluster) -> None:
    """A scheduler-preempted Job pod leaves evidence in the order a real cluster leaves it (jobs.py docstring):
    the DisruptionTarget condition, then the Preempted Event, then the Job's Failed condition, and last the
    pod's removal; the Job still counts the failure."""
    seen: list[tuple[int, str, str]] = []

    def record(kind: str):  # type: ignore[no-untyped-def]
        def callback(event_type: str, obj: dict, old: dict | None) -> None:
            rv = int(obj["metadata"]["resourceVersion"])
            if kind == "Pod" and event_type == "DELETED":
                seen.append((rv, "pod deleted", obj["metadata"]["name"]))
            elif kind == "Pod" and (kit.condition(obj, "DisruptionTarget") or {}).get("status") == "True" \
                    and not (old and kit.condition(old, "DisruptionTarget")):
                seen.append((rv, "pod DisruptionTarget", obj["metadata"]["name"]))
            elif kind == "Event" and event_type == "ADDED" and obj["reason"] == "Preempted":
                seen.append((rv, "Preempted event", obj["involvedObject"]["name"]))
            elif kind == "Job" and (kit.condition(obj, "Failed") or {}).get("status") == "True" \
                    and not (old and kit.condition(old, "Failed")):
                seen.append((rv, "Job Failed", obj["metadata"]["name"]))
        return callback

    stops = [cluster.store.watch(api, kind, None, record(kind))
             for api, kind in (("v1", "Pod"), ("v1", "Event"), ("batch/v1", "Job"))]
    scripts_of(cluster).add({"job-name": "bumped"}, PodScript(run_seconds=60, preempt_after=2))
    cluster.store.create(kit.job("bumped", queue=None, backoff_limit=0))
    cluster.advance(3)
    for stop in stops:
        stop()
    assert [what for _, what, _ in sorted(seen)] == ["pod DisruptionTarget", "Preempted event", "Job Failed",
                                                    "pod deleted"]
    assert cluster.store.list("v1", "Pod", "team", label_selector="job-name=bumped") == []
    job = cluster.store.get("batch/v1", "Job", "team", "bumped")
    assert job["status"]["failed"] == 1
    pod_name = next(name for _, what, name in seen if what == "pod deleted")
    preempted = [e for e in cluster.store.list("v1", "Event", "team")
                 if e["reason"] == "Preempted" and e["involvedObject"]["name"] == pod_name]
    assert preempted and re.fullmatch(r"Preempted by pod [0-9a-f-]{36} on node node-1", preempted[0]["message"])


def test_preempted_pods_stay_counted_after_removal(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"job-name": "twice"}, PodScript(run_seconds=60, preempt_after=2))
    cluster.store.create(kit.job("twice", queue=None, backoff_limit=1))
    cluster.advance(3)
    job = cluster.store.get("batch/v1", "Job", "team", "twice")
    assert job["status"]["failed"] == 1 and not kit.condition(job, "Failed")
    cluster.advance(3)
    job = cluster.store.get("batch/v1", "Job", "team", "twice")
    assert job["status"]["failed"] == 2 and kit.condition(job, "Failed")["reason"] == "BackoffLimitExceeded"


def test_crash_loop_for_always_restarting_pods(cluster: SimCluster) -> None:
    scripts_of(cluster).add({"app": "flaky"}, PodScript(run_seconds=2, exit_code=1, logs=["starting", "crash"]))
    cluster.store.create(kit.deployment("flaky", replicas=1))
    cluster.advance(3)
    (pod,) = cluster.store.list("v1", "Pod", "team")
    status = pod["status"]["containerStatuses"][0]
    assert pod["status"]["phase"] == "Running"
    assert status["state"]["waiting"]["reason"] == "CrashLoopBackOff"
    assert status["lastState"]["terminated"]["exitCode"] == 1
    cluster.advance(10)
    (pod,) = cluster.store.list("v1", "Pod", "team")
    status = pod["status"]["containerStatuses"][0]
    assert status["restartCount"] >= 1
    assert cluster.logs.read("team", pod["metadata"]["name"], "main", previous=True)
    assert "BackOff" in reasons(cluster, pod)


def test_script_book_matching_rules() -> None:
    book = ScriptBook()
    slow, named, custom = PodScript(run_seconds=9), PodScript(run_seconds=8), PodScript(run_seconds=7)
    book.add({"team": "a"}, slow).add(r"^special-", named).add(lambda p: p["metadata"]["name"].endswith("-x"), custom)
    pod = {"metadata": {"name": "special-1", "labels": {"team": "a"}}, "spec": {"restartPolicy": "Never"}}
    assert book.for_pod(pod) is slow
    assert book.for_pod({"metadata": {"name": "special-2"}, "spec": {}}) is named
    assert book.for_pod({"metadata": {"name": "foo-x"}, "spec": {}}) is custom
    assert book.for_pod({"metadata": {"name": "plain"}, "spec": {"restartPolicy": "Never"}}).run_seconds == 1
    assert book.for_pod({"metadata": {"name": "server"}, "spec": {}}).run_seconds is None
    with pytest.raises(ValueError, match="pull_error"):
        PodScript(pull_error="Nope")
    with pytest.raises(TypeError):
        book.add(42, slow)  # type: ignore[arg-type]


def test_a_new_kubelet_takes_over_without_repeating_output(cluster: SimCluster) -> None:
    from tau_testing.sim.controllers import Kubelet

    scripts_of(cluster).add({"job-name": "long"}, PodScript(run_seconds=10, log_every=1,
                                                            logs=[f"line {i}" for i in range(10)]))
    cluster.store.create(kit.job("long", queue=None))
    cluster.advance(4)
    cluster.controllers["pods"] = Kubelet()
    cluster.advance(10)
    pod = _pod(cluster, "long")
    assert pod["status"]["phase"] == "Succeeded"
    assert cluster.logs.read("team", pod["metadata"]["name"], "main") == [f"line {i}" for i in range(10)]
    assert all(e.get("count", 1) == 1 for e in for_object(cluster, pod))


def test_injected_pod_eviction_and_scheduler_preemption(cluster: SimCluster) -> None:
    from tau_testing.sim.controllers import evict_pod

    scripts_of(cluster).add({}, PodScript(run_seconds=600))
    cluster.store.create(kit.job("pressured", queue=None, backoff_limit=0))
    cluster.store.create(kit.job("bumped", queue=None, backoff_limit=0))
    cluster.advance(3)
    pressured, bumped = _pod(cluster, "pressured"), _pod(cluster, "bumped")
    evict_pod(cluster, "team", pressured["metadata"]["name"])
    bumped = evict_pod(cluster, "team", bumped["metadata"]["name"], preempted_by_scheduler=True)
    cluster.settle()
    pressured = _pod(cluster, "pressured")
    # the scheduler deleted its victim; it is gone once the Job controller counted it (jobs.py docstring)
    assert cluster.store.list("v1", "Pod", "team", label_selector="job-name=bumped") == []
    assert (pressured["status"]["phase"], pressured["status"]["reason"]) == ("Failed", "Evicted")
    assert kit.condition(pressured, "DisruptionTarget")["reason"] == "TerminationByKubelet"
    assert {"Evicted", "Killing"} <= set(reasons(cluster, pressured))
    assert kit.condition(bumped, "DisruptionTarget")["reason"] == "PreemptionByScheduler"
    assert "Preempted" in reasons(cluster, bumped)
    assert _state(bumped)["terminated"]["exitCode"] == 137
    for name in ("pressured", "bumped"):
        job = cluster.store.get("batch/v1", "Job", "team", name)
        assert kit.condition(job, "Failed")["reason"] == "BackoffLimitExceeded"
    assert cluster.logs.is_terminated("team", pressured["metadata"]["name"], "main")
    with pytest.raises(LookupError):
        evict_pod(cluster, "team", "nope")


@pytest.mark.parametrize(("version", "message"), [("1.31", "Created container main"),
                                                  ("1.33", "Created container: main")])
def test_kubelet_wording_follows_the_kubernetes_version(version: str, message: str) -> None:
    c = SimCluster(clock="fake", kubernetes_version=version)
    install_default_controllers(c)
    add_node(c, "node-1")
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}})
    c.store.create(kit.job("v", queue=None))
    c.settle()
    (pod,) = c.store.list("v1", "Pod", "team")
    assert message in [e["message"] for e in for_object(c, pod)]
