"""tau_core.azure_auth without Entra: reusing an Azure CLI login (azure-identity's real AzureCliCredential
running an `az` stand-in), TAU_AUTH_MODE, and the token cache file's mode."""

from __future__ import annotations

import json
import stat
import sys
from pathlib import Path

import pytest

from tau_core.azure_auth import (
    AzureCloud,
    AzureCredential,
    SignInRequired,
    TokenCacheFile,
    auth_mode,
    cache_path,
)
from tau_core.errors import ConfigError

TENANT = "11111111-2222-4333-8444-555555555555"


def _fake_az(bin_dir: Path, log: Path) -> None:
    """An `az` that answers `az account get-access-token` as the real one does (JSON on stdout)."""
    bin_dir.mkdir()
    script = bin_dir / "az"
    script.write_text(
        f"#!{sys.executable}\n"
        "import json, sys\n"
        f"open({str(log)!r}, 'a').write(' '.join(sys.argv[1:]) + '\\n')\n"
        "print(json.dumps({'accessToken': 'cli-token', 'expires_on': 4102444800, 'tokenType': 'Bearer',\n"
        f"                  'tenant': {TENANT!r}, 'subscription': 'x'}}))\n")
    script.chmod(0o755)


def test_an_existing_azure_cli_login_is_reused(tmp_path, monkeypatch):
    log = tmp_path / "az.log"
    _fake_az(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    env = {"TAU_CONFIG_DIR": str(tmp_path / "config")}
    token = AzureCredential(TENANT, env=env).get_token("https://management.azure.com/.default", interactive=False)
    assert (token.token, token.source, token.expires_on) == ("cli-token", "azurecli", 4102444800)
    assert f"--resource https://management.azure.com --tenant {TENANT}" in log.read_text()
    assert not cache_path(env).exists()  # msal was never involved
    assert "cli-token" not in repr(token)


def test_azurecli_mode_without_a_login_asks_for_az_login(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    env = {"TAU_CONFIG_DIR": str(tmp_path / "config"), "TAU_AUTH_MODE": "azurecli"}
    with pytest.raises(SignInRequired) as caught:
        AzureCredential(TENANT, env=env).get_token("https://management.azure.com/.default", interactive=False)
    assert "(access.aks.tenantID)" in caught.value.message
    assert f"az login --tenant {TENANT}" in (caught.value.hint or "")


def test_the_azure_cli_login_is_never_sent_to_another_cloud(tmp_path, monkeypatch):
    log = tmp_path / "az.log"
    _fake_az(tmp_path / "bin", log)
    monkeypatch.setenv("PATH", f"{tmp_path / 'bin'}:/usr/bin:/bin")
    env = {"TAU_CONFIG_DIR": str(tmp_path / "config"), "AZURE_AUTHORITY_HOST": "https://127.0.0.1:9",
           "TAU_AUTH_MODE": "azurecli"}
    with pytest.raises(SignInRequired):
        AzureCredential(TENANT, env=env).get_token("https://127.0.0.1:9/.default", interactive=False)
    assert not log.exists()


@pytest.mark.parametrize(("value", "mode"), [(None, ""), ("", ""), ("DeviceCode", "devicecode"),
                                             ("interactive", "interactive"), ("azurecli", "azurecli")])
def test_auth_mode_values(value, mode):
    assert auth_mode({} if value is None else {"TAU_AUTH_MODE": value}) == mode


def test_an_unknown_auth_mode_is_a_config_error():
    with pytest.raises(ConfigError) as caught:
        auth_mode({"TAU_AUTH_MODE": "kubelogin"})
    assert "TAU_AUTH_MODE='kubelogin'" in caught.value.message


def test_cloud_from_env_and_its_session_trusts_only_the_given_ca(tmp_path):
    ca = tmp_path / "ca.pem"
    cloud = AzureCloud.from_env({"AZURE_AUTHORITY_HOST": "login.example.net/", "TAU_AZURE_ARM_ENDPOINT":
                                 "https://arm.example.net/", "TAU_AZURE_CA_BUNDLE": str(ca)})
    assert (cloud.authority_host, cloud.arm_endpoint, cloud.arm_scope) == (
        "https://login.example.net", "https://arm.example.net", "https://arm.example.net/.default")
    session = cloud.session()
    assert (session.verify, session.trust_env) == (str(ca), False)
    assert AzureCloud.from_env({}).is_public


def test_token_cache_file_is_private_and_survives_damage(tmp_path):
    path = tmp_path / "config" / "auth" / "msal-token-cache.json"
    cache = TokenCacheFile(path)
    cache.cache.add({"client_id": "c", "scope": ["s"], "token_endpoint": "https://login.example.net/t/token",
                     "response": {"access_token": "at", "expires_in": 3600, "token_type": "Bearer"}})
    cache.save()
    assert (stat.S_IMODE(path.stat().st_mode), stat.S_IMODE(path.parent.stat().st_mode)) == (0o600, 0o700)
    assert "AccessToken" in json.loads(path.read_text())
    path.write_text("{not json")
    assert list(TokenCacheFile(path).cache.search("AccessToken")) == []  # damaged: sign in again, no crash
