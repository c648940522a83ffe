"""Helpers shared by the end-to-end lifecycle modules (test_cluster_lifecycle.py, test_cluster_robustness.py):
a checked-in target in a git repository, pods and environments of a run in the simulated TauGrid cluster."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tau_testing.sim.scenarios.taugrid import NAMESPACE, TauGridScenario
from tau_testing.sim.scripts import PodScript, scripts_of

NS = ["-n", NAMESPACE]


def pull_until_watched(cluster: Any, job_name: str, *, watches: int = 1) -> None:
    """Script ``job_name``'s pod to pull its image until a client has opened ``watches`` pod watches and the pod
    has existed for a few seconds, then run.

    A condition instead of a race between scaled time and process start-up: on a loaded machine the
    watching CLI may need seconds to start, and it must still see the pull before the pod is ready.  A watch
    opened before the pod exists (the CLI can be faster than the Job controller) sees the pod only when it is
    created, so the pull also lasts a few seconds past the pod's creation.
    """
    import threading
    import time

    opened = threading.Event()
    created: list[float] = []

    def pulling(pod: dict[str, Any]) -> bool:
        if (pod["metadata"].get("labels") or {}).get("job-name") != job_name or opened.is_set():
            return False
        created.append(time.monotonic())
        return True

    def watch_opened() -> None:
        deadline = time.monotonic() + 120  # generous: a stuck CLI fails its own assertions long before
        while time.monotonic() < deadline and (cluster.requests.count(verb="watch", resource="pods") < watches
                                               or not created or time.monotonic() - created[0] < 3.0):
            time.sleep(0.05)
        opened.set()

    book = scripts_of(cluster)
    book.add(pulling, PodScript(pull_seconds=10**6, run_seconds=600))
    book.add({"job-name": job_name}, PodScript(run_seconds=600))
    threading.Thread(target=watch_opened, daemon=True).start()


def write_target(repo: Path, name: str = "train", *, engine: str = "job", extra: str = "") -> Path:
    (repo / "tau").mkdir(parents=True, exist_ok=True)
    (repo / "train.py").write_text("print('training')\n")
    compute = ("compute:\n  gpus: 0\n  cpu_request: \"1\"\n  memory_limit: 1Gi\n" if engine == "job" else
               "compute:\n  workers: 1\n  gpus_per_worker: 0\n")
    body = (f"name: {name}\nengine: {engine}\nentrypoint: ../train.py\n{compute}"
            "runtime:\n  image: ghcr.io/acme/train:1.0\npolicy:\n  queue: jobqueue\n" + extra)
    path = repo / "tau" / f"{name}.yaml"
    path.write_text(body)
    return path


def pods_of(scenario: TauGridScenario, job: str) -> list[dict[str, Any]]:
    return [p for p in scenario.cluster.store.list("v1", "Pod", NAMESPACE)
            if (p["metadata"].get("labels") or {}).get("job-name") == job]


def env_of(obj: dict[str, Any]) -> dict[str, str]:
    containers = obj["spec"]["template"]["spec"]["containers"]
    return {e["name"]: e.get("value", "") for e in containers[0].get("env") or []}


def is_retry(pod: dict[str, Any]) -> bool:
    return any(e.get("name") == "TAU_RETRY_ATTEMPT" for c in pod["spec"]["containers"] for e in c.get("env") or [])


#: A resilience block retrying on one reason: ``RETRY.format(on="OOMKilled")``.
RETRY = "resilience:\n  max_retries: 2\n  retry_on: [{on}]\n  backoff_initial: 0s\n"
