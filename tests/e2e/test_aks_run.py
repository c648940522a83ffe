"""End to end on AKS access: a descriptor with `access.method: aks` -> `tau workspace connection` (approval and a
device-code sign-in against the loopback Entra) -> `tau run train` against the simulator acting as the AKS API
server, authenticated only through the kubeconfig's exec plugin (`tau workspace token`) -> tokens refreshed when
they expire, in a new command and inside one long session."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_testing.azure import AksStandIn, age_token_cache, start_aks_stand_in

AKS_APP = "6dae42f8-4368-4678-94ff-3960e28e3630"
UPN = "researcher@contoso.example"


@pytest.fixture
def aks(tmp_path: Path, tau_env: dict[str, str | None]) -> Iterator[AksStandIn]:
    stand_in = start_aks_stand_in(tmp_path / "volume", tau_env)
    yield stand_in
    stand_in.stop()


@pytest.fixture
def repo(tmp_path: Path, aks: AksStandIn, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "tau" / "workspace.connection.yaml").write_text(aks.descriptor())
    (root / "train.py").write_text("print('hi')\n")
    (root / "tau" / "train.yaml").write_text("name: train\nengine: job\nentrypoint: ../train.py\n"
                                             "runtime:\n  image: ghcr.io/acme/train:1.0\ncompute:\n  gpus: 0\n")
    monkeypatch.chdir(root)
    return root


def _cache(tau_env: dict[str, str | None]) -> Path:
    return Path(str(tau_env["TAU_CONFIG_DIR"])) / "auth" / "msal-token-cache.json"


def test_connection_then_server_dry_run_and_submit_through_the_exec_plugin(tau_cli, tau_env, repo, aks):
    connected = tau_cli("workspace", "connection", input="y\n")
    assert connected.exit_code == 0, connected
    aks.cluster.requests.clear()
    dry = tau_cli("run", "train", "--dry-run=server")
    assert dry.exit_code == 0, dry
    entries = aks.cluster.requests.entries
    assert entries and {e.user for e in entries} == {UPN}  # every request carried an Entra token for the AKS app
    assert any(e.verb == "create" and e.resource == "jobs.batch" for e in entries)
    assert aks.cluster.store.get("batch/v1", "Job", "aurora", "train") is None  # server dry-run persisted nothing

    submitted = tau_cli("run", "train")
    assert submitted.exit_code == 0, submitted
    job = aks.cluster.store.get("batch/v1", "Job", "aurora", "train")
    assert job is not None and job["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobqueue"
    tokens = list(aks.entra.issued) + list(aks.entra.refresh_tokens)
    for text in (dry.stdout, dry.stderr, submitted.stdout, submitted.stderr, json.dumps(job)):
        assert not any(t in text for t in tokens)


def test_an_expired_token_is_refreshed_by_the_next_command(tau_cli, tau_env, repo, aks):
    assert tau_cli("workspace", "connection", input="y\n").exit_code == 0
    old = set(aks.entra.issued)
    age_token_cache(_cache(tau_env), 7200)  # two hours pass on the client ...
    aks.entra.expire_all()                  # ... and on the server: every old token is refused now
    refreshes = aks.entra.grants("refresh_token")
    aks.cluster.requests.clear()
    result = tau_cli("run", "train", "--dry-run=server")
    assert result.exit_code == 0, result
    assert aks.entra.grants("refresh_token") > refreshes
    assert {e.status for e in aks.cluster.requests.entries} - {200, 201} == set()
    assert any(aks.entra.verify(t, AKS_APP) for t in set(aks.entra.issued) - old)


def test_an_expired_sign_in_stops_a_run_with_sign_in_again(tau_cli, tau_env, repo, aks):
    assert tau_cli("workspace", "connection", input="y\n").exit_code == 0
    age_token_cache(_cache(tau_env), 7200)
    aks.entra.expire_all()
    aks.entra.revoke_refresh_tokens()
    result = tau_cli("run", "train", "--dry-run=server")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert (f"error: an Azure sign-in to tenant {aks.tenant} (access.aks.tenantID) has expired; sign in again"
            in result.stderr)


def test_one_long_session_runs_the_exec_plugin_again_when_its_token_expires(tau_cli, tau_env, repo, aks,
                                                                            monkeypatch):
    from tau_core.kube import KubeSession, run

    for name, value in tau_env.items():  # the exec plugin inherits this process's environment here
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    connected = tau_cli("workspace", "connection", "-o", "json", input="y\n")
    assert connected.exit_code == 0, connected
    kubeconfig = json.loads(connected.stdout)["kubeconfig_path"]
    # tokens that live less than the clients' five-minute safety margin count as expired as soon as issued
    aks.entra.token_lifetime = 120
    age_token_cache(_cache(tau_env), 7200)

    async def two_reads() -> None:
        async with await KubeSession.connect(kubeconfig=kubeconfig, context="aurora-aks") as session:
            await session.get("/api/v1/namespaces/aurora/pods")
            await session.get("/api/v1/namespaces/aurora/pods")

    before = aks.entra.grants("refresh_token")
    aks.cluster.requests.clear()
    run(two_reads)
    assert aks.entra.grants("refresh_token") - before >= 2  # one fresh token per request, no sign-in
    assert [e.status for e in aks.cluster.requests.entries] == [200, 200]
