"""An SDK submission that ships a Secret reaches Kueue only after the Secret exists.

The simulated cluster runs on the real clock, so its Kueue controller reconciles continuously while the CLI
submits, and the Secret's create is slowed down: without the queue gate Kueue would see the RayJob's
queue label and create (then admit) its Workload while the Secret is still missing. An admission hook on
the simulator's store records every Workload created and every unsuspension, and checks the Secret each time.
"""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_testing.sim.scenarios.taugrid import NAMESPACE, RESEARCHER_GROUP
from tau_testing.sim.scripts import PodScript, scripts_of

pytestmark = pytest.mark.realclock

MODULE = ("import tau\n\n@tau.train(name='sec', gpus=0, runtime_pip=['x'], queue='jobqueue', "
          "env={'TOKEN': tau.secret_from_env('E2E_TOKEN'), 'PLAIN': 'p'})\ndef train(ctx):\n    return 1\n")
SECRET = "tau-sec-secrets"
RBAC = "rbac.authorization.k8s.io/v1"


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    root.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "secret_wf.py").write_text(MODULE)
    monkeypatch.chdir(root)
    monkeypatch.setenv("E2E_TOKEN", "tok-123-secret")
    return root


class Witness:
    """Every moment Kueue acts on the RayJob, and whether its Secret existed then."""

    def __init__(self, cluster: Any) -> None:
        self.cluster = cluster
        self.events: list[tuple[str, bool]] = []
        cluster.store.admission_hooks.append(self)

    def __call__(self, operation: str, rtype: Any, obj: dict[str, Any], old: dict[str, Any] | None) -> None:
        meta = obj.get("metadata") or {}
        if rtype.kind == "Workload" and operation == "CREATE" and "tau-sec" in meta.get("name", ""):
            self.events.append(("workload created", self._secret_exists()))
        if (rtype.kind == "RayJob" and operation == "UPDATE" and meta.get("name") == "tau-sec" and old
                and (old.get("spec") or {}).get("suspend") and not (obj.get("spec") or {}).get("suspend")):
            self.events.append(("rayjob unsuspended", self._secret_exists()))

    def _secret_exists(self) -> bool:
        return self.cluster.store.get("v1", "Secret", NAMESPACE, SECRET) is not None


def _grant_secrets(cluster: Any) -> None:
    cluster.store.create({"apiVersion": RBAC, "kind": "Role", "metadata": {"name": "sdk-secrets", "namespace": NAMESPACE},
                          "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["create", "get", "delete"]}]})
    cluster.store.create({"apiVersion": RBAC, "kind": "RoleBinding",
                          "metadata": {"name": "sdk-secrets", "namespace": NAMESPACE},
                          "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "sdk-secrets"},
                          "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group",
                                        "name": RESEARCHER_GROUP}]})


def test_kueue_admits_only_after_the_secret_exists(taugrid_factory, tau_cli, repo: Path) -> None:  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=20)
    cluster = scenario.cluster
    scripts_of(cluster).add({}, PodScript(run_seconds=30, logs=["driver: running"]), kind="RayJob")
    _grant_secrets(cluster)
    witness = Witness(cluster)
    cluster.faults.latency(1.5, method="POST", path_regex=r"/secrets$")  # Kueue gets its chance meanwhile
    r = tau_cli("python", "submit", "secret_wf.py", "--namespace", NAMESPACE)
    assert r.exit_code == 0, r
    rayjob = cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-sec")
    secret = cluster.store.get("v1", "Secret", NAMESPACE, SECRET)
    assert rayjob["metadata"]["labels"][keys.KUEUE_QUEUE_NAME] == "jobqueue"  # restored after the Secret
    owner = secret["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["name"], owner["uid"]) == ("RayJob", "tau-sec", rayjob["metadata"]["uid"])
    stored = secret.get("stringData") or {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}
    assert stored == {"TOKEN": "tok-123-secret"} and "tok-123-secret" not in str(rayjob)
    cluster.wait_for(lambda: ("rayjob unsuspended", True) in witness.events, timeout=60)
    assert ("workload created", True) in witness.events
    assert all(secret_there for _, secret_there in witness.events), witness.events


@pytest.mark.parametrize("failure", ["forbidden", "server error"])
def test_a_secret_that_cannot_be_created_leaves_nothing_admitted(taugrid_factory, tau_cli, repo: Path,  # type: ignore[no-untyped-def]
                                                                 failure: str) -> None:
    scenario = taugrid_factory(clock="real", time_scale=20)
    cluster = scenario.cluster
    witness = Witness(cluster)
    cluster.faults.latency(1.0, method="POST", path_regex=r"/secrets$")
    if failure == "server error":
        _grant_secrets(cluster)
        cluster.faults.add(method="POST", path_regex=r"/secrets$", status=500, message="etcd is unhappy")
    r = tau_cli("python", "submit", "secret_wf.py", "--namespace", NAMESPACE)
    assert r.exit_code == 1, r
    assert cluster.store.get("ray.io/v1", "RayJob", NAMESPACE, "tau-sec") is None  # rolled back
    assert cluster.store.get("v1", "Secret", NAMESPACE, SECRET) is None
    workloads = cluster.store.list("kueue.x-k8s.io/v1beta2", "Workload", NAMESPACE)
    assert not [w for w in workloads if "tau-sec" in w["metadata"]["name"]]
    assert witness.events == []  # Kueue never saw a queued RayJob, let alone admitted one
