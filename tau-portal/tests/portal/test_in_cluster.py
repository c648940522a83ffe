"""``portal serve --in-cluster`` (what the chart runs): the pod's service account token and CA, the API server
from ``KUBERNETES_SERVICE_HOST``/``PORT``, over TLS to the simulator, as the Portal's read-only identity."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from tau_core import kubeconfig as kubeconfig_module
from tau_core.errors import ClusterError
from taugrid_portal.portal import cache as cache_module

PORTAL_USER = "system:serviceaccount:tau-system:tau-portal"


def test_in_cluster_reads_through_the_service_account_over_tls(sim_cluster_factory: Any, portal_factory: Any,
                                                                 make_job: Any, in_pod: Any, tmp_path: Path) -> None:
    from tau_testing.sim.scenarios.taugrid import TauGridScenario

    cluster = sim_cluster_factory(controllers=False, tls=True)
    TauGridScenario.install(cluster, tmp_path / "volume")
    in_pod(cluster, PORTAL_USER, ["system:serviceaccounts", "system:serviceaccounts:tau-system"])
    cluster.store.create(make_job("in-cluster-1"))
    # in_cluster wins over the kubeconfig the fixture also writes (it binds the read-only role to PORTAL_USER)
    portal = portal_factory(cluster, in_cluster=True)
    doc = portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and r.json()["total"] == 1, timeout=60).json()
    assert [r["name"] for r in doc["runs"]] == ["in-cluster-1"] and doc["cache"]["fresh"] is True
    deadline = time.monotonic() + 30  # the informers open their watches after their lists
    while not any(verb == "watch" for verb, _ in cluster.requests.counts()):
        assert time.monotonic() < deadline, cluster.requests.counts()
        time.sleep(0.05)


def test_in_cluster_outside_a_pod_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", tmp_path / "none")
    with pytest.raises(ClusterError) as err:
        anyio.run(cache_module.connect_session, None, None, True)
    assert "--in-cluster: not running in a pod" in err.value.message
