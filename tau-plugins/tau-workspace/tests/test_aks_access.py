"""`access.method: aks`: Entra sign-in through msal, ARM listClusterUserCredential and `tau workspace token`
as the kubeconfig's exec plugin, against loopback TLS fakes of Entra and ARM with the simulator as the AKS
API server (tau_testing.azure).  No Azure account is contacted."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_testing.azure import DECLINE, EXPIRE, AksStandIn, age_token_cache, start_aks_stand_in

AKS_APP = "6dae42f8-4368-4678-94ff-3960e28e3630"


@pytest.fixture
def aks(tmp_path: Path, tau_env: dict[str, str | None]) -> Iterator[AksStandIn]:
    stand_in = start_aks_stand_in(tmp_path / "volume", tau_env)
    yield stand_in
    stand_in.stop()


@pytest.fixture
def repo(tmp_path: Path, aks: AksStandIn) -> Path:
    root = tmp_path / "repo"
    (root / "tau").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (root / "tau" / "workspace.connection.yaml").write_text(aks.descriptor())
    return root


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def _config(tau_env: dict[str, str | None]) -> Path:
    return Path(str(tau_env["TAU_CONFIG_DIR"]))


def connect(tau_cli, repo: Path):  # type: ignore[no-untyped-def]
    result = tau_cli("workspace", "connection", str(repo), "-o", "json", input="y\n")
    assert result.exit_code == 0, result
    return result


def test_first_connection_signs_in_by_device_code_and_keeps_no_token_in_files_or_output(
        tau_cli, tau_env, repo, aks):
    result = connect(tau_cli, repo)
    assert "Approve and connect? [y/N]" in result.stderr
    assert "enter the code" in result.stderr  # the device-code instruction, on stderr
    doc = json.loads(result.stdout)
    assert (doc["workspace"], doc["namespace"], doc["queue"]) == ("aurora", "aurora", "jobqueue")
    assert aks.entra.grants("urn:ietf:params:oauth:grant-type:device_code") == 1
    assert [status for _, status in aks.arm.requests] == [200]

    kubeconfig = Path(doc["kubeconfig_path"])
    assert (_mode(kubeconfig), _mode(kubeconfig.parent)) == (0o600, 0o700)
    isolated = json.loads(kubeconfig.read_text())
    assert isolated["clusters"][0]["cluster"]["server"] == aks.cluster.url
    (user,) = isolated["users"]
    assert list(user["user"]) == ["exec"]  # references the plugin only: no token, no certificate
    exec_ = user["user"]["exec"]
    assert exec_["apiVersion"] == "client.authentication.k8s.io/v1"
    assert Path(exec_["command"]).name == "tau" and "kubelogin" not in json.dumps(exec_)
    assert exec_["args"] == ["workspace", "token", "--tenant-id", aks.tenant, "--server-id", AKS_APP]

    cache = _config(tau_env) / "auth" / "msal-token-cache.json"
    assert (_mode(cache), _mode(cache.parent)) == (0o600, 0o700)
    tokens = list(aks.entra.issued) + list(aks.entra.refresh_tokens)
    assert tokens
    written = [p for p in _config(tau_env).rglob("*") if p.is_file() and p != cache]
    written += [repo / "tau" / "workspace.connection.yaml"]
    for text in [result.stdout, result.stderr] + [p.read_text() for p in written]:
        assert not any(t in text for t in tokens)


def test_token_verb_prints_an_exec_credential_and_reuses_the_cached_token(tau_cli, repo, aks):
    connect(tau_cli, repo)
    grants = len(aks.entra.requests)
    first = tau_cli("workspace", "token", "--tenant-id", aks.tenant)
    second = tau_cli("workspace", "token", "--tenant-id", aks.tenant, "--server-id", AKS_APP)
    assert first.exit_code == 0 and second.exit_code == 0, (first, second)
    credential = json.loads(first.stdout)
    assert (credential["apiVersion"], credential["kind"]) == ("client.authentication.k8s.io/v1", "ExecCredential")
    assert credential["status"]["expirationTimestamp"].endswith("Z")
    assert aks.entra.verify(credential["status"]["token"], AKS_APP) is not None
    assert json.loads(second.stdout)["status"]["token"] == credential["status"]["token"]
    # warm cache: no token request at all (msal reads the tenant's OpenID configuration only)
    assert {what for _, what in aks.entra.requests[grants:]} <= {"openid-configuration"}


def test_an_expired_token_is_refreshed_silently(tau_cli, tau_env, repo, aks):
    connect(tau_cli, repo)
    old = json.loads(tau_cli("workspace", "token", "--tenant-id", aks.tenant).stdout)["status"]["token"]
    assert age_token_cache(_config(tau_env) / "auth" / "msal-token-cache.json", 7200) >= 1
    aks.entra.expire_all()
    refreshes = aks.entra.grants("refresh_token")
    result = tau_cli("workspace", "token", "--tenant-id", aks.tenant)
    assert result.exit_code == 0, result
    new = json.loads(result.stdout)["status"]["token"]
    assert new != old and aks.entra.verify(new, AKS_APP) is not None and aks.entra.verify(old, AKS_APP) is None
    assert aks.entra.grants("refresh_token") == refreshes + 1
    assert "enter the code" not in result.stderr


def test_an_expired_sign_in_says_sign_in_again_and_connection_signs_in_again(tau_cli, tau_env, repo, aks):
    connect(tau_cli, repo)
    age_token_cache(_config(tau_env) / "auth" / "msal-token-cache.json", 7200)
    aks.entra.expire_all()
    aks.entra.revoke_refresh_tokens()
    result = tau_cli("workspace", "token", "--tenant-id", aks.tenant)
    assert result.exit_code == 1 and result.stdout == ""
    (line, hint) = result.stderr.splitlines()
    assert line == (f"error: an Azure sign-in to tenant {aks.tenant} (access.aks.tenantID) has expired; "
                    "sign in again")
    assert "tau workspace connection" in hint
    again = connect(tau_cli, repo)
    assert "enter the code" in again.stderr
    assert aks.entra.grants("urn:ietf:params:oauth:grant-type:device_code") == 2


def test_the_simulated_aks_api_server_refuses_requests_without_an_entra_token(aks):
    import urllib.error
    import urllib.request

    context = __import__("ssl").create_default_context(cafile=str(aks.fakes.ca_path))
    request = urllib.request.Request(f"{aks.cluster.url}/api/v1/namespaces/aurora/pods",
                                     headers={"Authorization": "Bearer fake-at-never-issued"})
    with pytest.raises(urllib.error.HTTPError) as caught:
        urllib.request.urlopen(request, context=context, timeout=10)
    assert caught.value.code == 401


# -- faults: one line naming the descriptor field, nothing saved ---------------------------------------------

def _fails(tau_cli, tau_env, repo: Path) -> str:  # type: ignore[no-untyped-def]
    result = tau_cli("workspace", "connection", str(repo), input="y\n")
    assert result.exit_code == 1, result
    assert "Traceback" not in result.stderr
    assert not (_config(tau_env) / "connections").exists()
    errors = [line for line in result.stderr.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1
    return errors[0]


def test_wrong_tenant_unknown_to_entra(tau_cli, tau_env, repo, aks):
    (repo / "tau" / "workspace.connection.yaml").write_text(
        aks.descriptor(tenant="99999999-9999-4999-8999-999999999999"))
    line = _fails(tau_cli, tau_env, repo)
    assert line == "error: Entra ID does not know tenant 99999999-9999-4999-8999-999999999999 (access.aks.tenantID)"


def test_wrong_tenant_for_the_clusters_subscription(tau_cli, tau_env, repo, aks):
    other = "99999999-9999-4999-8999-999999999999"
    aks.entra.tenants.add(other)
    (repo / "tau" / "workspace.connection.yaml").write_text(aks.descriptor(tenant=other))
    line = _fails(tau_cli, tau_env, repo)
    assert f"belongs to a different tenant than {other} (access.aks.tenantID)" in line


def test_denied_consent(tau_cli, tau_env, repo, aks):
    aks.entra.device_outcome = DECLINE
    line = _fails(tau_cli, tau_env, repo)
    assert line == f"error: the Azure sign-in to tenant {aks.tenant} (access.aks.tenantID) was declined"


def test_device_code_timeout(tau_cli, tau_env, repo, aks):
    aks.entra.device_outcome = EXPIRE
    line = _fails(tau_cli, tau_env, repo)
    assert line == (f"error: the device-code sign-in to tenant {aks.tenant} (access.aks.tenantID) expired before "
                    "it was completed")


def test_arm_403_without_the_cluster_user_role(tau_cli, tau_env, repo, aks):
    aks.arm.clusters[aks.resource_id.lower()].cluster_users.clear()
    line = _fails(tau_cli, tau_env, repo)
    assert f"may not read user credentials of the AKS cluster {aks.resource_id} (access.aks.resourceID)" in line
    assert [status for _, status in aks.arm.requests] == [403]


def test_arm_404_for_the_cluster(tau_cli, tau_env, repo, aks):
    missing = aks.resource_id.replace("aurora-aks", "no-such-cluster")
    (repo / "tau" / "workspace.connection.yaml").write_text(aks.descriptor(resource_id=missing))
    line = _fails(tau_cli, tau_env, repo)
    assert line == f"error: the AKS cluster {missing} (access.aks.resourceID) was not found"


def test_static_local_account_credentials_are_refused(tau_cli, tau_env, repo, aks):
    aks.arm.clusters[aks.resource_id.lower()].static_credentials = True
    line = _fails(tau_cli, tau_env, repo)
    assert "handed out static credentials" in line and "(access.aks.resourceID)" in line


def test_unknown_auth_mode_names_the_variable(tau_cli, tau_env, repo, aks):
    result = tau_cli("workspace", "connection", str(repo), input="y\n", env={"TAU_AUTH_MODE": "magic"})
    assert result.exit_code == 1
    assert "TAU_AUTH_MODE='magic' is not a credential mode" in result.stderr


def test_sdk_clients_such_as_tau_data_and_kusto_reuse_the_same_sign_in(tau_cli, tau_env, repo, aks):
    from azure.core.credentials import AccessToken

    from tau_core.azure_auth import signed_in_credential

    env = {k: v for k, v in tau_env.items() if v is not None}
    assert signed_in_credential(env) is None  # nothing signed in yet
    connect(tau_cli, repo)
    credential = signed_in_credential(env)
    assert credential is not None and credential.credential.tenant_id == aks.tenant
    token = credential.get_token(f"{aks.arm.url}/.default")
    assert isinstance(token, AccessToken) and aks.entra.verify(token.token, aks.arm.url) is not None
    assert aks.entra.grants("urn:ietf:params:oauth:grant-type:device_code") == 1  # signed in once


def test_a_changed_cluster_entry_from_arm_needs_approval_again(tau_cli, tau_env, repo, aks):
    first = json.loads(connect(tau_cli, repo).stdout)
    managed = aks.arm.clusters[aks.resource_id.lower()]
    managed.server = managed.server.replace("127.0.0.1", "localhost")  # ARM now names another API endpoint
    refused = tau_cli("workspace", "connection", str(repo))
    assert refused.exit_code == 1
    assert "Kubernetes context target changed" in refused.stderr
    assert "workspace connection requires interactive review" in refused.stderr
    approved = tau_cli("workspace", "connection", str(repo), "-o", "json", input="y\n")
    assert approved.exit_code == 0, approved
    second = json.loads(approved.stdout)
    assert second["kubeconfig_path"] != first["kubeconfig_path"] and not Path(first["kubeconfig_path"]).exists()
    server = json.loads(Path(second["kubeconfig_path"]).read_text())["clusters"][0]["cluster"]["server"]
    assert server.startswith("https://localhost:")


def test_interactive_mode_signs_in_through_a_real_browser(tmp_path, tau_env, repo, aks):
    """TAU_AUTH_MODE=interactive: msal opens the authorize URL in headless Chromium (BROWSER), the Entra fake's
    page posts a code to msal's loopback listener (form_post), and msal redeems it with its PKCE verifier."""
    import os
    import shutil
    import sys

    chromium = shutil.which("chromium") or "/usr/bin/chromium"
    assert Path(chromium).is_file(), "Chromium is needed (tests/tools/ensure-chromium.sh)"
    # webbrowser waits for the BROWSER command to exit while msal's listener waits for the browser: background it
    browser = (f"sh -c '{chromium} --headless --no-sandbox --disable-gpu --ignore-certificate-errors "
               f"--user-data-dir={tmp_path / 'chromium'} --dump-dom \"$0\" >{tmp_path / 'dom.html'} 2>/dev/null &' %s")
    env = {**os.environ, **{k: v for k, v in tau_env.items() if v is not None},
           "TAU_AUTH_MODE": "interactive", "BROWSER": browser}
    tau = str(Path(sys.executable).parent / "tau")
    result = subprocess.run([tau, "workspace", "connection", str(repo), "-o", "json"], input="y\n", text=True,
                            env=env, capture_output=True, timeout=120)
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout)["workspace"] == "aurora"
    assert aks.entra.grants("authorization_code") == 1 and aks.entra.grants("authorize") == 1
    assert aks.entra.grants("urn:ietf:params:oauth:grant-type:device_code") == 0


def test_the_exec_plugin_never_starts_a_sign_in_without_a_user(tau_cli, aks):
    result = tau_cli("workspace", "token", "--tenant-id", aks.tenant)
    assert result.exit_code == 1 and result.stdout == ""
    assert result.stderr.splitlines()[0] == (
        f"error: an Azure sign-in to tenant {aks.tenant} (access.aks.tenantID) is needed and this command may not "
        "start one")
    assert aks.entra.grants("devicecode") == 0


def test_read_verbs_in_a_connected_aks_repository_use_its_isolated_kubeconfig(tau_cli, repo, aks, monkeypatch):
    connect(tau_cli, repo)
    monkeypatch.chdir(repo)  # the AKS context exists only in the isolated kubeconfig the connection pinned
    status = tau_cli("workspace", "status", "aurora")
    assert status.exit_code == 0, status
    assert status.stdout.startswith("Workspace: aurora\n") and "phase:          Ready" in status.stdout
    quota = tau_cli("workspace", "quota", "show", "aurora", "-o", "json")
    assert quota.exit_code == 0, quota
    assert json.loads(quota.stdout)["namespace"] == "aurora"
