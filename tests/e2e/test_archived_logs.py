"""Logs that outlive their pods, proven by running the real rendered Job on the process kubelet.

The simulator runs the Job's own ``bash -c`` entrypoint wrapper as a local process, the wrapper archives the
program's stdout/stderr on the result PVC (a local directory), and after the pods are gone ``tau logs`` reads
that archive through the real helper pod of ``tau run get`` (its ``sh`` script runs as a process too).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from lifecycle_support import NS, pods_of, write_target

from tau_testing.sim.controllers import kit
from tau_testing.sim.scenarios.taugrid import NAMESPACE, RESULT_PVC, TauGridScenario

WAIT = 90.0  # a loaded machine runs bash and python3 slowly; never asserted as a duration
PROGRAM = """\
import sys
for step in range(3):
    print(f"step {step} loss={1.0 / (step + 1):.2f}", flush=True)
print("warning: from stderr", file=sys.stderr, flush=True)
"""


def _same(got: list[str], expected: list[str]) -> bool:
    """The same lines; stdout's in order (stdout and stderr are two streams, so they interleave freely)."""
    return sorted(got) == sorted(expected) and [g for g in got if "stderr" not in g] == \
        [e for e in expected if "stderr" not in e]


def _submit(scenario: TauGridScenario, tau_cli: Any, repo: Path) -> tuple[str, Path]:
    write_target(repo, extra=f"storage:\n  data_pvc: {RESULT_PVC}\n")
    (repo / "train.py").write_text(PROGRAM)
    r = tau_cli("run", "train", *NS)
    assert r.exit_code == 0, r
    cluster = scenario.cluster
    done = cluster.wait_for(lambda: kit.condition(cluster.store.get("batch/v1", "Job", NAMESPACE, "train"),
                                                  "Complete"), timeout=WAIT)
    assert done["status"] == "True"
    (pod,) = pods_of(scenario, "train")
    archives = list(scenario.volume.rglob(f"logs/{pod['metadata']['name']}-main.log"))
    assert len(archives) == 1, list(scenario.volume.rglob("*"))
    return pod["metadata"]["name"], archives[0]


def test_logs_survive_the_pods_and_say_where_they_came_from(taugrid_factory: Any, tau_cli: Any,
                                                           repo: Path) -> None:
    scenario = taugrid_factory(process_kubelet=True)
    pod_name, archive = _submit(scenario, tau_cli, repo)
    expected = ["step 0 loss=1.00", "step 1 loss=0.50", "step 2 loss=0.33", "warning: from stderr"]
    assert _same(archive.read_text().splitlines(), expected)  # written by the wrapper's tee, not a test double

    live = tau_cli("logs", "train", *NS)
    assert live.exit_code == 0, live
    assert _same(live.stdout.splitlines(), expected) and "archived" not in live.stderr

    # node loss / GC: the Job is still there, its pod is not -> the result location comes from the Job
    scenario.cluster.store.delete("v1", "Pod", NAMESPACE, pod_name)
    scenario.cluster.settle()
    archived = tau_cli("logs", "train", *NS, "--prefix")
    assert archived.exit_code == 0, archived
    assert _same(archived.stdout.splitlines(), [f"[archive/{pod_name}-main] {line}" for line in expected])
    assert f"logs archived on pvc/{RESULT_PVC}" in archived.stderr and f"{pod_name}-main.log" in archived.stderr

    # cancel deletes the Job too: the archive is still there, found with --path/--pvc
    output = "/data/" + str(archive.parent.parent.relative_to(scenario.volume))
    assert tau_cli("run", "cancel", "train", *NS).exit_code == 0
    gone = tau_cli("logs", "train", *NS)
    assert gone.exit_code == 1 and "--path" in gone.stderr and "--pvc" in gone.stderr
    again = tau_cli("logs", "train", *NS, "--path", output, "--pvc", RESULT_PVC, "--tail", "2")
    assert again.exit_code == 0, again
    assert len(again.stdout.splitlines()) == 2 and set(again.stdout.splitlines()) <= set(expected)
    assert "no live pods" in again.stderr
    ran = [pod for _, pod in scenario.cluster.process_kubelet.started]
    assert ran[0] == pod_name and any(p.startswith("tau-get-train-") for p in ran)  # helper pods ran their sh


LONG_PROGRAM = """\
import signal, sys, time
def stop(signum, frame):
    print("checkpointing on SIGTERM", flush=True)
    sys.exit(143)
signal.signal(signal.SIGTERM, stop)
print("started", flush=True)
while True:
    time.sleep(0.1)
"""


def test_cancel_while_running_keeps_what_the_program_said_after_sigterm(taugrid_factory: Any, tau_cli: Any,
                                                                         repo: Path) -> None:
    scenario = taugrid_factory(process_kubelet=True)
    write_target(repo, extra=f"storage:\n  data_pvc: {RESULT_PVC}\n")
    (repo / "train.py").write_text(LONG_PROGRAM)
    assert tau_cli("run", "train", *NS).exit_code == 0
    cluster = scenario.cluster

    def archive() -> Path | None:
        found = [p for p in scenario.volume.rglob("logs/train-*-main.log") if "started" in p.read_text()]
        return found[0] if found else None

    path = cluster.wait_for(archive, timeout=WAIT)
    assert tau_cli("run", "cancel", "train", *NS).exit_code == 0  # deletes the Job; the pod gets SIGTERM
    cluster.wait_for(lambda: "checkpointing on SIGTERM" in path.read_text(), timeout=WAIT)
    output = "/data/" + str(path.parent.parent.relative_to(scenario.volume))
    r = tau_cli("logs", "train", *NS, "--path", output, "--pvc", RESULT_PVC)
    assert r.exit_code == 0, r
    assert r.stdout.splitlines() == ["started", "checkpointing on SIGTERM"]
