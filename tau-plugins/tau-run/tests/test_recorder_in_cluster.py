"""``tau run history record --in-cluster`` (what the chart's Deployment runs): the pod's ServiceAccount through
tau_core's one in-cluster lookup, with no kubeconfig written anywhere."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from tau_core import kubeconfig as kubeconfig_module
from tau_core.errors import ClusterError
from tau_run.recorder.derive import Scope
from tau_run.recorder.main import RecordOptions, _session

RECORDER = "system:serviceaccount:tau-system:tau-lifecycle-recorder"


def _options() -> RecordOptions:
    return RecordOptions(scope=Scope(cluster="c", namespace="team-a"), endpoint="https://k.example",
                         database="db", table="t", health=None, in_cluster=True)


def test_in_cluster_reads_as_the_pods_service_account_over_tls(sim_cluster_factory: Any, in_pod: Any, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    cluster = sim_cluster_factory(controllers=False, tls=True)
    in_pod(cluster, RECORDER, ["system:serviceaccounts"])
    monkeypatch.setenv("KUBECONFIG", str(tmp_path / "absent"))  # in-cluster never reads a kubeconfig
    monkeypatch.setattr("tempfile.tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()

    async def read() -> tuple[str, str]:
        session = await _session(_options())
        try:
            return session.server, (await session.get("/version"))["gitVersion"]
        finally:
            await session.close()

    server, version = anyio.run(read)
    assert server == f"https://{cluster.host}:{cluster.port}" and version
    assert [e.user for e in cluster.requests.entries if e.path == "/version"] == [RECORDER]
    assert list((tmp_path / "tmp").iterdir()) == []  # the token went into no file


def test_in_cluster_outside_a_pod_is_a_one_line_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setattr(kubeconfig_module, "SERVICE_ACCOUNT_DIR", tmp_path / "none")
    with pytest.raises(ClusterError) as err:
        anyio.run(_session, _options())
    assert "--in-cluster: not running in a pod" in err.value.message
