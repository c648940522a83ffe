"""The session's two transports against the simulated API server.

The session speaks HTTP/1.1 itself for tokens, basic auth, client certificates, CAs and exec
credential plugins, and goes through kubernetes-asyncio for the rest (auth providers, proxies).
Both must read, stream, watch and map errors the same way.
"""

from __future__ import annotations

import asyncio
import base64
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from tau_core.errors import ClusterError
from tau_core.kube import KubeApiError, KubeSession, RetryPolicy, api_path
from tau_core.kubehttp import plan
from tau_testing.sim import SimCluster
from tau_testing.sim.scenarios.taugrid import TauGridScenario

WS = api_path("tau.azure.com/v1alpha1", "workspaces", namespace="tau-system")
CONFIGMAPS = api_path("v1", "configmaps", namespace="aurora")
FAST = RetryPolicy(attempts=4, base=0.001, cap=0.01, max_retry_after=0.05)


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory):  # type: ignore[no-untyped-def]
    cluster = SimCluster().start()
    scenario = TauGridScenario.install(cluster, tmp_path_factory.mktemp("vol"))
    yield cluster, scenario
    cluster.stop()


def _config(server: str, user: dict[str, Any], cluster: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Config", "current-context": "c",
            "clusters": [{"name": "k", "cluster": {"server": server, **(cluster or {})}}],
            "users": [{"name": "u", "user": user}],
            "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}


def _write(path: Path, config: dict[str, Any]) -> Path:
    path.write_text(json.dumps(config))
    return path


def _exec_user(token: str, *, expires: str | None = None, log: Path | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {"token": token}
    if expires:
        status["expirationTimestamp"] = expires
    credential = {"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential", "status": status}
    script = (f"import os, sys; print({json.dumps(json.dumps(credential))}); "
              "log = os.environ.get('PLUGIN_LOG'); log and open(log, 'a').write(os.environ['KUBERNETES_EXEC_INFO'] + '\\n')")
    plugin: dict[str, Any] = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
                              "args": ["-c", script], "interactiveMode": "Never"}
    if log:
        plugin["env"] = [{"name": "PLUGIN_LOG", "value": str(log)}]
    return {"exec": plugin}


@pytest.fixture
def via_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """A proxy variable sends the session through kubernetes-asyncio (NO_PROXY keeps it direct)."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")


def _token(cluster: SimCluster, name: str) -> str:
    return next(u.token for u in cluster.users if u.name == name)


async def _read_and_watch(kubeconfig: Path) -> tuple[str, list[str], list[str], KubeApiError]:
    async with await KubeSession.connect(kubeconfig=kubeconfig, retry=FAST) as s:
        kind = type(s._transport).__name__
        names = [i["metadata"]["name"] for i in await s.list_items(WS)]
        many = await asyncio.gather(*[s.get(WS + "/aurora") for _ in range(5)])
        names += [str((m or {}).get("metadata", {}).get("name")) for m in many]
        events = [e["type"] async for e in s.watch(CONFIGMAPS, timeout_seconds=1)]
        with pytest.raises(KubeApiError) as missing:
            await s.get(api_path("v1", "configmaps", namespace="aurora", name="no-such-map"))
    return kind, names, events, missing.value


def test_plan_covers_plain_credentials_and_defers_the_rest(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("from-file\n")
    endpoint = plan(_config("https://api.example:6443/prefix", {"tokenFile": str(token_file), "token": "inline"},
                            {"insecure-skip-tls-verify": True, "tls-server-name": "kube"}), env={})
    assert endpoint is not None
    assert (endpoint.scheme, endpoint.host, endpoint.port, endpoint.base_path) == ("https", "api.example", 6443,
                                                                                   "/prefix")
    assert endpoint.authorization == "Bearer from-file"
    assert (endpoint.verify, endpoint.server_name) == (False, "kube")
    basic = plan(_config("http://127.0.0.1:8080", {"username": "a", "password": "b"}), env={})
    assert basic is not None and basic.authorization == "Basic YTpi" and basic.port == 8080
    plain = _config("http://127.0.0.1:8080", {"token": "t"})
    assert plan(plain, env={}) is not None
    assert plan(plain, env={"HTTPS_PROXY": "http://proxy:3128"}) is None
    assert plan(_config("http://h", _exec_user("t")), env={}) is not None
    assert plan(_config("http://h", {**_exec_user("t"), "token": "also"}), env={}) is None
    assert plan(_config("http://h", {"auth-provider": {"name": "oidc"}}), env={}) is None
    assert plan(_config("http://h", {"token": "t"}, {"proxy-url": "http://proxy:3128"}), env={}) is None
    assert plan(_config("ftp://h", {"token": "t"}), env={}) is None


def test_direct_http_reads_gathers_watches_and_maps_errors(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    kubeconfig = _write(tmp_path / "config", _config(cluster.url, {"token": _token(cluster, "admin")}))
    cluster.store.create({"apiVersion": "v1", "kind": "ConfigMap",
                          "metadata": {"name": "direct", "namespace": "aurora"}, "data": {}})
    kind, names, events, missing = asyncio.run(_read_and_watch(kubeconfig))
    assert kind == "HttpTransport"
    assert names == ["aurora"] * 6
    assert "ADDED" in events
    assert missing.not_found and "no-such-map not found" in missing.message


def test_exec_plugin_token_direct(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    log = tmp_path / "plugin.log"
    kubeconfig = _write(tmp_path / "config", _config(cluster.url, _exec_user(_token(cluster, "admin"), log=log)))
    kind, names, events, missing = asyncio.run(_read_and_watch(kubeconfig))
    assert kind == "HttpTransport"
    assert names == ["aurora"] * 6
    assert "ADDED" in events
    assert missing.not_found
    runs = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(runs) == 1  # one credential serves every request of the session
    assert runs[0]["kind"] == "ExecCredential" and runs[0]["spec"] == {"interactive": False}


def test_expired_exec_credential_is_renewed(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    log = tmp_path / "plugin.log"
    user = _exec_user(_token(cluster, "admin"), expires="2020-01-01T00:00:00Z", log=log)
    kubeconfig = _write(tmp_path / "config", _config(cluster.url, user))

    async def go() -> None:
        async with await KubeSession.connect(kubeconfig=kubeconfig, retry=FAST) as s:
            for _ in range(3):
                await s.list_items(WS)

    asyncio.run(go())
    assert len(log.read_text().splitlines()) == 3


def test_failing_exec_plugin_is_a_clear_error(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    plugin = {"apiVersion": "client.authentication.k8s.io/v1", "command": sys.executable,
              "args": ["-c", "import sys; sys.exit('AADSTS70043: the refresh token has expired')"],
              "installHint": "install kubelogin"}
    missing = {"apiVersion": "client.authentication.k8s.io/v1", "command": str(tmp_path / "no-such-plugin"),
               "installHint": "install kubelogin"}

    async def go(path: Path) -> None:
        async with await KubeSession.connect(kubeconfig=path, retry=FAST) as s:
            await s.list_items(WS)

    with pytest.raises(ClusterError) as err:
        asyncio.run(go(_write(tmp_path / "failing", _config(cluster.url, {"exec": plugin}))))
    assert "credential plugin" in err.value.message and "exit 1" in err.value.message
    assert "refresh token has expired" in err.value.message and err.value.hint == "install kubelogin"
    with pytest.raises(ClusterError) as err:
        asyncio.run(go(_write(tmp_path / "missing", _config(cluster.url, {"exec": missing}))))
    assert "cannot run the kubeconfig credential plugin" in err.value.message
    assert err.value.hint == "install kubelogin"


@pytest.mark.usefixtures("via_library")
def test_proxy_settings_go_through_kubernetes_asyncio(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    kubeconfig = _write(tmp_path / "config", _config(cluster.url, _exec_user(_token(cluster, "admin"))))
    kind, names, events, missing = asyncio.run(_read_and_watch(kubeconfig))
    assert kind == "LibraryTransport"
    assert names == ["aurora"] * 6
    assert "ADDED" in events
    assert missing.not_found and "no-such-map not found" in missing.message


@pytest.mark.usefixtures("via_library")
def test_library_transport_maps_unreachable_and_rejected(grid, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    cluster, _ = grid
    rejected = _write(tmp_path / "bad", _config(cluster.url, _exec_user("not-a-token")))
    gone = _write(tmp_path / "gone", _config("http://127.0.0.1:9", {"token": "t"}))

    async def go(path: Path) -> None:
        async with await KubeSession.connect(kubeconfig=path, retry=FAST) as s:
            await s.list_items(WS)

    with pytest.raises(KubeApiError) as err:
        asyncio.run(go(rejected))
    assert err.value.status == 401
    with pytest.raises(KubeApiError) as err:
        asyncio.run(go(gone))
    assert "cannot reach the Kubernetes API server at http://127.0.0.1:9" in err.value.message


@pytest.mark.parametrize("library", [False, True], ids=["direct", "library"])
def test_stream_to_unreachable_server_is_a_clear_error(tmp_path: Path, library: bool,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    if library:
        monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    gone = _write(tmp_path / "gone", _config("http://127.0.0.1:9", {"token": "t"}))

    async def go() -> None:
        async with await KubeSession.connect(kubeconfig=gone, retry=FAST) as s:
            async for _ in s.watch(CONFIGMAPS, timeout_seconds=1):
                pass

    with pytest.raises(KubeApiError) as err:
        asyncio.run(go())
    assert "cannot reach the Kubernetes API server at http://127.0.0.1:9" in err.value.message


def _client_certificate() -> tuple[bytes, bytes]:
    import datetime

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "researcher")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(days=1))
            .not_valid_after(now + datetime.timedelta(days=1)).sign(key, hashes.SHA256()))
    pem = serialization.Encoding.PEM
    return (cert.public_bytes(pem),
            key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))


def test_direct_https_with_the_cluster_ca(tmp_path: Path) -> None:
    cluster = SimCluster(tls=True).start()
    try:
        base = cluster.kubeconfig(user="admin")
        ca = base["clusters"][0]["cluster"]["certificate-authority-data"]
        token = _token(cluster, "admin")
        trusted = _write(tmp_path / "trusted", _config(cluster.url, {"token": token},
                                                       {"certificate-authority-data": ca}))
        insecure = _write(tmp_path / "insecure", _config(cluster.url, {"token": token},
                                                         {"insecure-skip-tls-verify": True}))
        untrusted = _write(tmp_path / "untrusted", _config(cluster.url, {"token": token}))
        cert_pem, key_pem = _client_certificate()
        cert_dir = tmp_path / "certs"
        cert_dir.mkdir()
        (cert_dir / "client.crt").write_bytes(cert_pem)
        (cert_dir / "client.key").write_bytes(key_pem)
        inline = {"token": token, "client-certificate-data": base64.b64encode(cert_pem).decode(),
                  "client-key-data": base64.b64encode(key_pem).decode()}
        files = {"token": token, "client-certificate": "certs/client.crt", "client-key": "certs/client.key"}
        with_inline = _write(tmp_path / "inline", _config(cluster.url, inline, {"certificate-authority-data": ca}))
        with_files = _write(tmp_path / "files", _config(cluster.url, files, {"certificate-authority-data": ca}))
        path = api_path("v1", "namespaces")

        async def go(kubeconfig: Path) -> list[str]:
            async with await KubeSession.connect(kubeconfig=kubeconfig, retry=FAST) as s:
                assert type(s._transport).__name__ == "HttpTransport"
                return [i["metadata"]["name"] for i in await s.list_items(path)]

        assert "default" in asyncio.run(go(trusted))
        assert "default" in asyncio.run(go(insecure))
        assert "default" in asyncio.run(go(with_inline))
        assert "default" in asyncio.run(go(with_files))  # relative to the kubeconfig's directory
        with pytest.raises(KubeApiError) as err:
            asyncio.run(go(untrusted))
        assert "cannot reach the Kubernetes API server at https://" in err.value.message
        assert "certificate" in err.value.message.lower()
    finally:
        cluster.stop()
