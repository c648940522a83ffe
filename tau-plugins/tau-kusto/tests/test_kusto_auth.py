"""Which credential Kusto reads and writes sign in with (:mod:`tau_kusto.auth`): the real azure-identity and
Tau credential classes are built from the environment, without any network call, and a missing or
half-configured sign-in is one error line with a hint."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau_core.azure_auth import TokenCredentialAdapter
from tau_core.errors import ConfigError
from tau_kusto.auth import select_credential


def _az(_name: str) -> str:
    return "/usr/bin/az"


def _no_az(_name: str) -> None:
    return None


def test_workload_identity_comes_first(tmp_path: Path) -> None:
    from azure.identity import WorkloadIdentityCredential

    token = tmp_path / "sa-token"
    token.write_text("projected-service-account-token")
    env = {"AZURE_FEDERATED_TOKEN_FILE": str(token), "AZURE_CLIENT_ID": "c1", "AZURE_TENANT_ID": "t1",
           "TAU_CONFIG_DIR": str(tmp_path)}
    assert isinstance(select_credential(env, which=_az), WorkloadIdentityCredential)


def test_a_half_configured_pod_names_what_is_missing(tmp_path: Path) -> None:
    env = {"AZURE_FEDERATED_TOKEN_FILE": str(tmp_path / "sa-token"), "AZURE_TENANT_ID": "t1"}
    with pytest.raises(ConfigError) as err:
        select_credential(env, which=_az)
    assert err.value.message == ("workload identity is incomplete: AZURE_FEDERATED_TOKEN_FILE is set but "
                                 "AZURE_CLIENT_ID is not")
    assert "azure.workload.identity/client-id" in (err.value.hint or "")


def test_tau_sign_in_for_a_known_tenant_then_the_azure_cli(tmp_path: Path) -> None:
    from azure.identity import AzureCliCredential

    base = {"TAU_CONFIG_DIR": str(tmp_path)}
    # a known tenant: Tau's sign-in (an az login for that tenant, else an msal device code)
    assert isinstance(select_credential({**base, "AZURE_TENANT_ID": "t1"}, which=_az), TokenCredentialAdapter)
    # no tenant known, but an az login on this machine
    assert isinstance(select_credential(base, which=_az), AzureCliCredential)
    # TAU_AUTH_MODE asks for a device code: the CLI login is not used behind its back
    with pytest.raises(ConfigError, match="no Azure sign-in for Kusto"):
        select_credential({**base, "TAU_AUTH_MODE": "devicecode"}, which=_az)
    with pytest.raises(ConfigError, match="TAU_AUTH_MODE='nope' is not a credential mode"):
        select_credential({**base, "TAU_AUTH_MODE": "nope"}, which=_az)


def test_no_sign_in_is_one_error_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    from tau_core.plugins import Host, set_host
    from taugrid_portal.cli import main

    for name in ("AZURE_FEDERATED_TOKEN_FILE", "AZURE_CLIENT_ID", "AZURE_TENANT_ID", "TAU_AUTH_MODE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("TAU_CONFIG_DIR", str(tmp_path / "config"))
    monkeypatch.setenv("PATH", str(tmp_path))  # no az
    previous = set_host(Host.create())
    try:
        with pytest.raises(SystemExit) as done:
            main(["experiment", "stellar", "some-run", "--source", "kusto", "--kusto-endpoint",
                  "https://adx1.westeurope.kusto.windows.net"])
    finally:
        set_host(previous)
    err = capsys.readouterr().err
    assert done.value.code == 1 and "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert lines[0] == "error: no Azure sign-in for Kusto", err
    assert lines[1].startswith("hint: run `az login`") and len(lines) == 2, err
