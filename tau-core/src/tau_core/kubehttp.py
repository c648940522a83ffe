"""HTTP/1.1 to the Kubernetes API server over plain asyncio streams (the session's fast transport).

A Tau command sends a handful of small JSON requests to one server.  Going through
``kubernetes-asyncio`` costs most of a short command's start-up: ``aiohttp`` builds two SSL
contexts (parsing the system CA bundle twice) when it is imported, the library's REST client
builds a third even for a plain-HTTP server, and its configuration pulls in ``urllib3`` and
``dateutil``.  This transport speaks HTTP/1.1 itself, builds an SSL context only for an
``https://`` server (loading just the kubeconfig's CA when one is given, as the library does), and
keeps a small pool of keep-alive connections so that concurrent reads can run side by side.

It covers ``token``, ``tokenFile``, ``username``/``password``, client certificates and CAs (file or
inline data), ``insecure-skip-tls-verify``, ``tls-server-name`` and ``exec`` credential plugins
(``client.authentication.k8s.io``: a token or a client certificate, run again once the credential
expires).  For anything else (an ``auth-provider``, a ``proxy-url``, proxy environment variables,
unknown fields) :func:`plan` answers ``None`` and the session uses ``kubernetes-asyncio``
(:mod:`tau_core.kubeclient`), so every mechanism the library supports keeps working.

Both transports offer the same two calls — :meth:`request` (the whole response) and
:meth:`stream` (the body as chunks) — and raise :class:`TransportError` (an ``OSError``) or
``TimeoutError`` when the exchange fails.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import tempfile
import time
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from tau_core.errors import ClusterError

_PROXY_VARIABLES = ("https_proxy", "http_proxy", "all_proxy")
_USER_FIELDS = frozenset({"token", "tokenFile", "username", "password", "client-certificate",
                          "client-certificate-data", "client-key", "client-key-data"})
_EXEC_FIELDS = frozenset({"command", "args", "env", "apiVersion", "installHint", "provideClusterInfo",
                          "interactiveMode"})
#: an exec credential is renewed this many seconds before it expires
_EXPIRY_MARGIN = 10.0
_CLUSTER_FIELDS = frozenset({"server", "certificate-authority", "certificate-authority-data",
                             "insecure-skip-tls-verify", "tls-server-name", "extensions", "disable-compression"})
#: an idle keep-alive connection older than this is not trusted with a write (the server may have closed it)
_WRITE_REUSE_SECONDS = 10.0
_MAX_IDLE = 8
_MAX_HEADER_BYTES = 64 * 1024


class TransportError(OSError):
    """The HTTP exchange failed (connection refused, reset, closed early, malformed answer)."""


@dataclass
class Endpoint:
    """Where and how to reach the API server: everything the transport needs from a kubeconfig context."""

    scheme: str
    host: str
    port: int
    base_path: str = ""
    authorization: str | None = None
    ca_file: str | None = None
    ca_data: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    cert_data: bytes | None = None
    key_data: bytes | None = None
    verify: bool = True
    server_name: str | None = None
    host_header: str = field(default="")
    exec_plugin: dict[str, Any] | None = None
    exec_expires: float | None = None


def plan(config: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Endpoint | None:
    """The :class:`Endpoint` for an isolated kubeconfig (see ``KubeConfig.isolate``), or None.

    None means the context needs ``kubernetes-asyncio`` (auth providers, proxies, or fields this
    transport does not know).
    """
    env = os.environ if env is None else env
    if any(env.get(name) or env.get(name.upper()) for name in _PROXY_VARIABLES):
        return None
    try:
        cluster = dict(config["clusters"][0].get("cluster") or {})
        user = dict(config["users"][0].get("user") or {})
    except (KeyError, IndexError, TypeError, AttributeError):
        return None
    exec_plugin = user.pop("exec", None)
    if set(cluster) - _CLUSTER_FIELDS or set(user) - _USER_FIELDS:
        return None
    if exec_plugin is not None and not _plain_exec(exec_plugin, user):
        return None
    server = cluster.get("server")
    if not isinstance(server, str):
        return None
    parts = urlsplit(server.rstrip("/"))
    try:
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        return None
    https = parts.scheme == "https"
    port = port or (443 if https else 80)
    host_header = parts.netloc.rpartition("@")[2]
    endpoint = Endpoint(scheme=parts.scheme, host=parts.hostname, port=port, base_path=parts.path,
                        host_header=host_header)
    token = _token(user)
    if exec_plugin is not None:
        endpoint.exec_plugin = dict(exec_plugin)
    elif token:
        endpoint.authorization = f"Bearer {token}"
    elif "username" in user and "password" in user:
        basic = f"{user['username']}:{user['password']}".encode()
        endpoint.authorization = "Basic " + base64.b64encode(basic).decode()
    if "insecure-skip-tls-verify" in cluster:
        endpoint.verify = not cluster["insecure-skip-tls-verify"]
    if cluster.get("tls-server-name"):
        endpoint.server_name = str(cluster["tls-server-name"])
    if https:
        endpoint.ca_file = _text(cluster.get("certificate-authority"))
        if endpoint.ca_file is None and cluster.get("certificate-authority-data"):
            endpoint.ca_data = _decode(cluster["certificate-authority-data"], "certificate-authority-data").decode()
        endpoint.cert_file = _text(user.get("client-certificate"))
        endpoint.key_file = _text(user.get("client-key"))
        if endpoint.cert_file is None and user.get("client-certificate-data"):
            endpoint.cert_data = _decode(user["client-certificate-data"], "client-certificate-data")
        if endpoint.key_file is None and user.get("client-key-data"):
            endpoint.key_data = _decode(user["client-key-data"], "client-key-data")
    return endpoint


def _plain_exec(plugin: Any, user: Mapping[str, Any]) -> bool:
    """An exec plugin this transport runs itself: well formed, and the user's only credential."""
    if not isinstance(plugin, dict) or set(plugin) - _EXEC_FIELDS or user:
        return False
    if not isinstance(plugin.get("command"), str) or not plugin["command"] or not plugin.get("apiVersion"):
        return False
    env = plugin.get("env") or []
    return (isinstance(plugin.get("args") or [], list) and isinstance(env, list)
            and all(isinstance(e, dict) and "name" in e and "value" in e for e in env))


async def run_exec_plugin(plugin: Mapping[str, Any]) -> dict[str, Any]:
    """Run a kubeconfig ``exec`` credential plugin and return its ``ExecCredential`` status."""
    import sys

    command = str(plugin["command"])
    api_version = str(plugin["apiVersion"])
    env = dict(os.environ)
    env.update({str(e["name"]): str(e["value"]) for e in plugin.get("env") or []})
    env["KUBERNETES_EXEC_INFO"] = json.dumps({"apiVersion": api_version, "kind": "ExecCredential",
                                              "spec": {"interactive": sys.stdout.isatty()}})
    install = str(plugin.get("installHint") or "").strip()
    try:
        proc = await asyncio.create_subprocess_exec(
            command, *[str(a) for a in plugin.get("args") or []], env=env, stdin=None,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    except OSError as exc:
        raise ClusterError(f"cannot run the kubeconfig credential plugin {command}: {exc.strerror or exc}",
                           hint=install or "install the plugin, or fix the exec command in the kubeconfig") from exc
    stdout, stderr = await proc.communicate()
    if proc.returncode != 0:
        detail = stderr.decode("utf-8", "replace").strip().splitlines()
        raise ClusterError(
            f"the kubeconfig credential plugin {command} failed (exit {proc.returncode})"
            + (f": {detail[-1]}" if detail else ""),
            hint=install or "sign in again (for AKS: az login), or run the plugin by hand to see why")
    try:
        data = json.loads(stdout)
    except ValueError:
        data = None
    status = data.get("status") if isinstance(data, dict) else None
    if not isinstance(status, dict) or data.get("kind") != "ExecCredential" or data.get("apiVersion") != api_version:
        raise ClusterError(f"the kubeconfig credential plugin {command} did not print an {api_version} "
                           "ExecCredential", hint="check the plugin and the exec apiVersion in the kubeconfig")
    if not status.get("token") and not (status.get("clientCertificateData") and status.get("clientKeyData")):
        raise ClusterError(f"the kubeconfig credential plugin {command} returned neither a token nor a client "
                           "certificate and key", hint="check the plugin's configuration")
    return status


def _expiry(value: Any) -> float | None:
    """Monotonic deadline for an RFC 3339 ``expirationTimestamp`` (None: does not expire)."""
    if not value:
        return None
    from datetime import UTC, datetime

    try:
        moment = datetime.fromisoformat(str(value).replace("Z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return time.monotonic() + (moment - datetime.now(UTC)).total_seconds()


def _text(value: Any) -> str | None:
    return str(value) if value else None


def _decode(value: Any, name: str) -> bytes:
    try:
        return base64.b64decode(str(value), validate=False)
    except ValueError as exc:
        raise ClusterError(f"kubeconfig field {name} is not valid base64",
                           hint="repair the kubeconfig entry for this context") from exc


def _token(user: Mapping[str, Any]) -> str | None:
    """``tokenFile`` wins over ``token``, as in kubernetes-asyncio."""
    if user.get("tokenFile"):
        path = Path(str(user["tokenFile"]))
        try:
            return path.read_text(encoding="utf-8").strip() or None
        except OSError as exc:
            raise ClusterError(f"cannot read the kubeconfig tokenFile {path}: {exc.strerror or exc}",
                               hint="repair the kubeconfig entry for this context") from exc
    token = user.get("token")
    return str(token) if token else None


@dataclass
class Response:
    status: int
    headers: dict[str, str]
    body: bytes = b""


class _Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.idle_since = time.monotonic()

    @property
    def usable(self) -> bool:
        return not self.writer.is_closing() and not self.reader.at_eof()

    def close(self) -> None:
        self.writer.close()


class HttpTransport:
    """A pool of HTTP/1.1 keep-alive connections to one API server."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self._idle: list[_Connection] = []
        self._ssl: Any = None
        self._credential_lock: asyncio.Lock | None = None

    async def _credentials(self) -> None:
        """Run the exec plugin when there is no credential yet or it (nearly) expired."""
        e = self.endpoint
        if e.exec_plugin is None:
            return
        if self._credential_lock is None:
            self._credential_lock = asyncio.Lock()
        async with self._credential_lock:
            fresh = e.exec_expires is None or time.monotonic() < e.exec_expires - _EXPIRY_MARGIN
            if (e.authorization or e.cert_data) and fresh:
                return
            status = await run_exec_plugin(e.exec_plugin)
            e.exec_expires = _expiry(status.get("expirationTimestamp"))
            if status.get("token"):
                e.authorization = f"Bearer {status['token']}"
                return
            e.cert_data = str(status["clientCertificateData"]).encode()
            e.key_data = str(status["clientKeyData"]).encode()
            self._ssl = None  # a new client certificate: connections made with the old one are dropped
            idle, self._idle = self._idle, []
            for conn in idle:
                conn.close()

    # -- connections -------------------------------------------------------------------------
    def _ssl_context(self) -> Any:
        if self._ssl is None:
            import ssl

            e = self.endpoint
            context = ssl.create_default_context(cafile=e.ca_file, cadata=e.ca_data)
            if e.cert_file or e.cert_data:
                _load_client_certificate(context, e)
            if not e.verify:
                context.check_hostname = False
                context.verify_mode = ssl.CERT_NONE
            self._ssl = context
        return self._ssl

    async def _open(self) -> _Connection:
        e = self.endpoint
        kwargs: dict[str, Any] = {}
        if e.scheme == "https":
            kwargs["ssl"] = self._ssl_context()
            kwargs["server_hostname"] = e.server_name or e.host
        reader, writer = await asyncio.open_connection(e.host, e.port, limit=2 ** 21, **kwargs)
        return _Connection(reader, writer)

    async def _acquire(self, idempotent: bool) -> tuple[_Connection, bool]:
        now = time.monotonic()
        while self._idle:
            conn = self._idle.pop()
            if conn.usable and (idempotent or now - conn.idle_since < _WRITE_REUSE_SECONDS):
                return conn, True
            conn.close()
        return await self._open(), False

    def _release(self, conn: _Connection, reusable: bool) -> None:
        if reusable and conn.usable and len(self._idle) < _MAX_IDLE:
            conn.idle_since = time.monotonic()
            self._idle.append(conn)
        else:
            conn.close()

    async def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        for conn in idle:
            try:
                await conn.writer.wait_closed()
            except (OSError, asyncio.CancelledError):
                pass

    # -- one exchange ----------------------------------------------------------------------------
    def _head(self, method: str, target: str, headers: Mapping[str, str], body: bytes | None) -> bytes:
        e = self.endpoint
        lines = [f"{method} {e.base_path}{target} HTTP/1.1", f"Host: {e.host_header}", "User-Agent: tau"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        if e.authorization:
            lines.append(f"Authorization: {e.authorization}")
        if body is not None or method in ("POST", "PUT", "PATCH"):
            lines.append(f"Content-Length: {len(body or b'')}")
        return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")

    async def _exchange(self, conn: _Connection, method: str, target: str, headers: Mapping[str, str],
                        body: bytes | None) -> tuple[int, dict[str, str]]:
        conn.writer.write(self._head(method, target, headers, body) + (body or b""))
        await conn.writer.drain()
        status, response_headers = await _read_head(conn.reader)
        while 100 <= status < 200:  # informational answers precede the real one
            status, response_headers = await _read_head(conn.reader)
        return status, response_headers

    async def request(self, method: str, target: str, headers: Mapping[str, str], body: Any,
                      timeout: float | None) -> Response:
        """Send one request and read the whole answer (within ``timeout`` seconds, if given)."""
        payload = _encode(body)
        idempotent = method in ("GET", "HEAD")
        await self._credentials()
        async with asyncio.timeout(timeout):
            conn, reused = await self._acquire(idempotent)
            try:
                try:
                    status, response_headers = await self._exchange(conn, method, target, headers, payload)
                except (TransportError, ConnectionError):
                    if not (reused and idempotent):
                        raise
                    conn.close()  # a stale keep-alive connection: a read may simply go again
                    conn, reused = await self._open(), False
                    status, response_headers = await self._exchange(conn, method, target, headers, payload)
                bodiless = method == "HEAD" or status in (204, 304)
                data = b"" if bodiless else await _read_body(conn.reader, response_headers)
            except BaseException:
                conn.close()
                raise
        delimited = bodiless or "content-length" in response_headers or "chunked" in response_headers.get(
            "transfer-encoding", "").lower()
        self._release(conn, delimited and _keep_alive(response_headers))
        return Response(status, response_headers, data)

    @asynccontextmanager
    async def stream(self, method: str, target: str, headers: Mapping[str, str],
                     connect_timeout: float | None = None) -> AsyncIterator[tuple[Response, AsyncIterator[bytes]]]:
        """Send one request and hand over the body as chunks (``logs?follow``, watches).

        Only connecting is bounded by ``connect_timeout``: a quiet stream may wait for its answer.
        """
        await self._credentials()
        async with asyncio.timeout(connect_timeout):
            conn = await self._open()
        try:
            status, response_headers = await self._exchange(conn, method, target, headers, None)
            yield Response(status, response_headers), _iter_body(conn.reader, response_headers)
        finally:
            conn.close()


def _encode(body: Any) -> bytes | None:
    if body is None:
        return None
    if isinstance(body, bytes):
        return body
    if isinstance(body, str):
        return body.encode("utf-8")
    return json.dumps(body).encode("utf-8")


def _load_client_certificate(context: Any, e: Endpoint) -> None:
    """Load the client certificate; inline data goes through a private temporary file (removed at once)."""
    if e.cert_file and not e.cert_data and (e.key_file or not e.key_data):
        context.load_cert_chain(e.cert_file, keyfile=e.key_file)
        return
    with tempfile.TemporaryDirectory(prefix="tau-tls-") as directory:
        os.chmod(directory, 0o700)
        cert, key = e.cert_file, e.key_file
        if e.cert_data:
            cert = os.path.join(directory, "client.crt")
            _write_private(cert, e.cert_data)
        if e.key_data:
            key = os.path.join(directory, "client.key")
            _write_private(key, e.key_data)
        context.load_cert_chain(cert, keyfile=key)


def _write_private(path: str, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


async def _readline(reader: asyncio.StreamReader) -> bytes:
    try:
        line = await reader.readuntil(b"\n")
    except asyncio.IncompleteReadError as exc:
        raise TransportError("the server closed the connection before answering") from exc
    except asyncio.LimitOverrunError as exc:
        raise TransportError("the server sent an oversized header line") from exc
    return line


async def _read_head(reader: asyncio.StreamReader) -> tuple[int, dict[str, str]]:
    status_line = await _readline(reader)
    parts = status_line.decode("latin-1").split(None, 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise TransportError(f"malformed HTTP status line from the server: {status_line[:80]!r}")
    headers: dict[str, str] = {}
    size = 0
    while True:
        line = await _readline(reader)
        size += len(line)
        if size > _MAX_HEADER_BYTES:
            raise TransportError("the server sent oversized headers")
        if line in (b"\r\n", b"\n"):
            break
        name, sep, value = line.decode("latin-1").partition(":")
        if not sep:
            raise TransportError(f"malformed HTTP header from the server: {line[:80]!r}")
        key = name.strip().lower()
        headers[key] = f"{headers[key]}, {value.strip()}" if key in headers else value.strip()
    if parts[0] == "HTTP/1.0" and "keep-alive" not in headers.get("connection", "").lower():
        headers["connection"] = "close"
    return int(parts[1]), headers


def _keep_alive(headers: Mapping[str, str]) -> bool:
    return "close" not in headers.get("connection", "").lower()


async def _read_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> bytes:
    return b"".join([chunk async for chunk in _iter_body(reader, headers)])


async def _iter_body(reader: asyncio.StreamReader, headers: Mapping[str, str]) -> AsyncIterator[bytes]:
    try:
        if "chunked" in headers.get("transfer-encoding", "").lower():
            while True:
                size_line = await _readline(reader)
                try:
                    size = int(size_line.split(b";", 1)[0].strip(), 16)
                except ValueError as exc:
                    raise TransportError(f"malformed chunk size from the server: {size_line[:40]!r}") from exc
                if size == 0:
                    while (await _readline(reader)) not in (b"\r\n", b"\n"):  # trailers
                        pass
                    return
                yield await reader.readexactly(size)
                await reader.readexactly(2)
        elif "content-length" in headers:
            try:
                remaining = int(headers["content-length"])
            except ValueError as exc:
                raise TransportError("malformed Content-Length from the server") from exc
            while remaining > 0:
                chunk = await reader.read(min(remaining, 2 ** 16))
                if not chunk:
                    raise TransportError("the server closed the connection in the middle of an answer")
                remaining -= len(chunk)
                yield chunk
        else:
            while chunk := await reader.read(2 ** 16):
                yield chunk
    except asyncio.IncompleteReadError as exc:
        raise TransportError("the server closed the connection in the middle of an answer") from exc
    except ConnectionError as exc:
        raise TransportError(str(exc) or type(exc).__name__) from exc
