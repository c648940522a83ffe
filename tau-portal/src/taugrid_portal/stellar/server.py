"""The read-only Stellar HTTP server (starlette + uvicorn).

Routes (GET/HEAD only; there are no write routes):

* ``/``                       service description (or a redirect to the default target's page)
* ``/healthz``                ``{ok, store_path, source}``; 503 when the store cannot be opened
* ``/stellar?target=…``       the Stellar page (same HTML as ``stellar -o html``, plus zoom detail)
* ``/api/stellar/snapshot``   the snapshot JSON (``target`` required; ``metric``, ``max_points``)
* ``/api/stellar/series``     one metric's series (``target``, ``metric`` required; ``run_id``,
                              ``start_step``, ``end_step``, ``max_points`` 1..12000, default 8000)
* ``/api/stellar/artifacts``  the artifact index of a target's runs (``target`` required)
* ``/api/stellar/artifact``   one artifact's bytes (``target``, ``artifact`` required): only a file inside
                              the store, of a run of the target, served sandboxed

Every response carries ``X-Content-Type-Options: nosniff``, ``X-Frame-Options: DENY`` and a
``frame-ancestors 'none'`` policy. Errors are JSON ``{error, code, detail, status}``. The server
binds 127.0.0.1 unless told otherwise.

Against DNS rebinding, a request is served only when its ``Host`` header names the server: an IP
literal, ``localhost``, the bound host name (and this machine's names when bound to all
interfaces), or a name listed in ``TAU_STELLAR_ALLOWED_HOSTS`` (comma-separated; ``*.example.com``
allowed) for a Portal behind a proxy.  Anything else gets 421.  No response discloses the
store's absolute path.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import sys
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau_core.errors import ConfigError, NotFoundError, TauError, UsageError

if TYPE_CHECKING:
    from starlette.requests import Request

    from .kusto import KustoOrigin

DEFAULT_HOST = "127.0.0.1"
SERIES_DEFAULT_POINTS = 8000
SECURITY_HEADERS = [
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"content-security-policy", b"frame-ancestors 'none'; base-uri 'none'; form-action 'none'"),
]
ENDPOINTS = ["/healthz", "/stellar?target=NAME", "/api/stellar/snapshot?target=NAME",
             "/api/stellar/series?target=NAME&metric=METRIC", "/api/stellar/artifacts?target=NAME",
             "/api/stellar/artifact?target=NAME&artifact=ID"]
#: artifact bytes are never a document of this origin: no script, no plugin, no frame but ours
ARTIFACT_CSP = b"sandbox; frame-ancestors 'self'; script-src 'none'; object-src 'none'; base-uri 'none'"
ARTIFACT_FIELDS = ("artifact_id", "run_id", "type", "name", "content_type", "size_bytes", "digest", "step",
                   "created_at", "direction", "caption", "alias")


ENV_ALLOWED_HOSTS = "TAU_STELLAR_ALLOWED_HOSTS"
STORE_PLACEHOLDER = "$TAU_EXP_STORE"
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def warn_if_exposed(host: str) -> None:
    """The one warning every command that binds a Stellar server prints for a non-loopback address."""
    from tau_core.output import warning

    if host not in ("127.0.0.1", "::1", "localhost"):
        warning(f"binding {host} exposes the store to the network without authentication "
                f"(requests must name an allowed host; see {ENV_ALLOWED_HOSTS})")


def allowed_hosts(bound: str | None = None, env: dict[str, str] | None = None) -> tuple[str, ...]:
    """Host names a request may carry: loopback, the bound name, configured names (IP literals always pass)."""
    env = dict(os.environ) if env is None else env
    names = set(LOOPBACK_NAMES)
    if bound:
        names.add(bound.lower())
        if bound in ("0.0.0.0", "::"):
            names.update(n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n)
    names.update(n.strip().lower() for n in env.get(ENV_ALLOWED_HOSTS, "").split(",") if n.strip())
    return tuple(sorted(names))


def host_allowed(header: str, allowed: tuple[str, ...]) -> bool:
    host = header.strip().lower()
    if host.startswith("["):  # [v6]:port
        host = host[1:host.find("]")] if "]" in host else host
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    if not host:
        return False
    try:
        ipaddress.ip_address(host)
        return True  # an IP literal cannot be rebound to another origin
    except ValueError:
        pass
    host = host.rstrip(".")
    return any(host == name or (name.startswith("*.") and host.endswith(name[1:])) for name in allowed)


class HostAllowlist:
    """ASGI middleware: refuse requests whose Host header names another site (DNS rebinding)."""

    def __init__(self, app: Any, allowed: tuple[str, ...]) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            header = next((v.decode("latin-1") for k, v in scope.get("headers", []) if k == b"host"), "")
            if not host_allowed(header, self.allowed):
                response = _error(421, "MISDIRECTED_REQUEST", "this Stellar server does not answer for that host",
                                  f"open it by its address, or add the name to {ENV_ALLOWED_HOSTS}")
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


class SecurityHeaders:
    """ASGI middleware: the security headers on every HTTP response, errors included."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: Any) -> None:
            if message["type"] == "http.response.start":
                names = {k.lower() for k, _ in message.get("headers", [])}
                headers = list(message.get("headers", []))
                headers += [(k, v) for k, v in SECURITY_HEADERS if k not in names]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_headers)


class SnapshotCache:
    """Recently built snapshots (and their rendered forms), valid while the store is unchanged.

    SQLite's ``PRAGMA data_version`` changes whenever another connection commits, so a page
    reload over an unchanged store costs no re-read of the metric files, and any write (an
    import, a new run) is seen on the next request.
    """

    def __init__(self, size: int = 8) -> None:
        self.size = size
        self.entries: dict[tuple[Any, ...], tuple[Any, dict[str, Any], dict[str, Any]]] = {}
        self.lock = threading.Lock()

    def get(
        self, store: Any, key: tuple[Any, ...], build: Callable[[], dict[str, Any]]
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        version = store.query("PRAGMA data_version")[0]["data_version"]
        with self.lock:
            hit = self.entries.get(key)
            if hit is not None and hit[0] == version:
                self.entries[key] = self.entries.pop(key)  # most recently used last
                return hit[1], hit[2]
        snap = build()
        with self.lock:
            self.entries[key] = (version, snap, {})
            while len(self.entries) > self.size:
                self.entries.pop(next(iter(self.entries)))
            return snap, self.entries[key][2]


def _error(status: int, code: str, detail: str, hint: str | None = None) -> Any:
    from starlette.responses import JSONResponse

    phrases = {400: "Bad Request", 404: "Not Found", 405: "Method Not Allowed", 421: "Misdirected Request",
               500: "Internal Server Error", 503: "Service Unavailable"}
    body: dict[str, Any] = {"error": phrases.get(status, "Error"), "code": code, "detail": detail, "status": status}
    if hint:
        body["hint"] = hint
    return JSONResponse(body, status_code=status, headers={"Cache-Control": "no-store"})


def _int_param(params: Any, name: str, default: int | None = None) -> int | None:
    raw = params.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise UsageError(f"{name} must be an integer, got {raw!r}") from None


class _Handlers:
    """The request handlers of one store's Stellar server: each reads the store lazily, and no answer
    discloses the store's location (see :meth:`private`)."""

    def __init__(self, store_path: str | Path, default_target: str | None, source: str = "local",
                 kusto: KustoOrigin | None = None) -> None:
        from .kusto import ScratchStores

        self.root = Path(store_path)
        self.default_target = default_target
        self.source = source if kusto is not None else "local"
        self.kusto = ScratchStores(kusto) if kusto is not None else None
        self.opened: Any = None
        self.lock = threading.Lock()
        self.cache = SnapshotCache()
        places = [self.root] + ([self.kusto.root] if self.kusto else [])
        self.hidden = sorted({str(p) for r in places for p in (r, r.absolute(), r.resolve())},
                             key=len, reverse=True)

    def store(self) -> Any:
        from taugrid_portal.store import ExperimentStore

        with self.lock:
            if self.opened is None:
                self.opened = ExperimentStore.open(self.root)
            return self.opened

    def store_for(self, target: str) -> tuple[Any, tuple[str, str] | None]:
        """The store answering for ``target`` under ``--source`` (see :func:`.kusto.choose`), and the origin a
        snapshot built from it shows (``None`` for the local store)."""
        from .kusto import choose, local_has

        kusto = self.kusto

        def remote(origin: KustoOrigin) -> tuple[Any, tuple[str, str] | None]:
            assert kusto is not None
            return kusto.get(target), (origin.label, origin.option)

        return choose(self.source, kusto.origin if kusto else None, lambda: (self.store(), None),
                      lambda: local_has(self.store(), target), remote,
                      lambda line: print(f"stellar: {line}", file=sys.stderr))

    def private(self, text: str | None) -> str | None:
        """``text`` without the store's location: the server never discloses local paths (commands in
        snapshots then read ``--store $TAU_EXP_STORE``)."""
        if text is None:
            return None
        for p in self.hidden:
            text = text.replace(p, STORE_PLACEHOLDER)
        return text

    def guarded(self, handler: Callable[[Request], Any]) -> Callable[[Request], Any]:
        """``handler`` answering a JSON error (never a traceback) for whatever it raises."""
        from .html import MissingAssetsError

        statuses: list[tuple[type[TauError], int, str]] = [
            (NotFoundError, 404, "NOT_FOUND"), (UsageError, 400, "INVALID_ARGUMENT"),
            (ConfigError, 503, "SOURCE_UNAVAILABLE"), (MissingAssetsError, 503, "ASSETS_UNAVAILABLE"),
            (TauError, 400, "INVALID_ARGUMENT")]

        def endpoint(request: Request) -> Any:
            try:
                return handler(request)
            except TauError as exc:
                status, code = next((s, c) for kind, s, c in statuses if isinstance(exc, kind))
                return _error(status, code, self.private(exc.message) or "", self.private(exc.hint))
            except Exception as exc:  # a bug: report it without leaking a traceback to the client
                print(f"stellar: internal error on {request.url.path}: {type(exc).__name__}: {exc}", file=sys.stderr)
                return _error(500, "INTERNAL", "internal error while building the response; see the server log")

        return endpoint

    @staticmethod
    def required(request: Request, name: str) -> str:
        value = request.query_params.get(name, "").strip()
        if not value:
            raise UsageError(f"{name} query parameter is required")
        return value

    def cached_snapshot(self, request: Request) -> tuple[dict[str, Any], dict[str, Any]]:
        from .snapshot import build_snapshot

        target = self.required(request, "target")
        metric = request.query_params.get("metric") or None
        max_points = _int_param(request.query_params, "max_points")
        s, origin = self.store_for(target)
        return self.cache.get(s, (str(s.root), target, metric, max_points),
                              lambda: build_snapshot(s, target, metric=metric, max_points=max_points, origin=origin))

    def index(self, request: Request) -> Any:
        from starlette.responses import JSONResponse, RedirectResponse

        if self.default_target:
            from urllib.parse import urlencode

            return RedirectResponse("/stellar?" + urlencode({"target": self.default_target}), status_code=307)
        return JSONResponse({"service": "tau.exp.stellar", "source": self.source, "read_only": True,
                             "endpoints": ENDPOINTS})

    def healthz(self, request: Request) -> Any:
        from starlette.responses import JSONResponse

        if self.source == "kusto":
            return JSONResponse({"ok": True, "source": "kusto"})
        try:
            s = self.store()
            s.query("SELECT 1 AS ok")
        except TauError as exc:
            return JSONResponse({"ok": False, "source": "local", "error": self.private(exc.message)}, status_code=503)
        return JSONResponse({"ok": True, "source": "local"})

    def page(self, request: Request) -> Any:
        from starlette.responses import HTMLResponse

        from .html import render_html

        snap, rendered = self.cached_snapshot(request)
        if "html" not in rendered:
            rendered["html"] = self.private(render_html(snap, series_path="/api/stellar/series"))
        return HTMLResponse(rendered["html"], headers={"Cache-Control": "no-store"})

    def snapshot(self, request: Request) -> Any:
        from starlette.responses import Response

        from .snapshot import to_json

        snap, rendered = self.cached_snapshot(request)
        if "json" not in rendered:
            rendered["json"] = self.private(to_json(snap, indent=None))
        return Response(rendered["json"], media_type="application/json", headers={"Cache-Control": "no-store"})

    def series(self, request: Request) -> Any:
        from starlette.responses import Response

        from .snapshot import build_series, to_json

        target = self.required(request, "target")
        metric = self.required(request, "metric")
        params = request.query_params
        max_points = _int_param(params, "max_points")
        detail = build_series(
            self.store_for(target)[0], target, metric,
            run_id=params.get("run_id") or None,
            start_step=_int_param(params, "start_step"),
            end_step=_int_param(params, "end_step"),
            max_points=SERIES_DEFAULT_POINTS if max_points is None else max_points,
        )
        return Response(self.private(to_json(detail, indent=None)), media_type="application/json",
                        headers={"Cache-Control": "no-store"})

    def artifacts(self, request: Request) -> Any:
        from urllib.parse import urlencode

        from starlette.responses import JSONResponse

        target = self.required(request, "target")
        store = self.store_for(target)[0]
        resolved = store.resolve_target(target)
        rows = [a for run_id in resolved.run_ids for a in store.artifacts(run_id)]
        listed = [{**{k: a.get(k) for k in ARTIFACT_FIELDS}, "fetch_url": "/api/stellar/artifact?"
                   + urlencode({"target": a["run_id"], "artifact": a["artifact_id"]})} for a in rows]
        return JSONResponse({"source": "index", "target": target, "target_type": resolved.type,
                             "run": resolved.id if resolved.type == "run" else "", "count": len(listed),
                             "artifacts": listed}, headers={"Cache-Control": "no-store"})

    def artifact(self, request: Request) -> Any:
        import mimetypes

        from starlette.responses import FileResponse

        target, artifact_id = self.required(request, "target"), self.required(request, "artifact")
        store = self.store_for(target)[0]
        resolved = store.resolve_target(target)
        row = store.artifact(artifact_id)
        if row["run_id"] not in resolved.run_ids:
            raise NotFoundError(f"artifact {artifact_id!r} was not found for target {target!r}")
        path = store.artifact_path(artifact_id)
        media = row.get("content_type") or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        return FileResponse(path, media_type=media, headers={
            "Cache-Control": "no-store", "Content-Security-Policy": ARTIFACT_CSP.decode(),
            "X-Frame-Options": "SAMEORIGIN"})

    @staticmethod
    async def http_error(request: Request, exc: Exception) -> Any:
        from starlette.exceptions import HTTPException

        assert isinstance(exc, HTTPException)
        if exc.status_code == 405:
            return _error(405, "METHOD_NOT_ALLOWED", "this Stellar server is read-only; use GET")
        if exc.status_code == 404:
            return _error(404, "NOT_FOUND", f"no route {request.url.path}", "routes: " + ", ".join(ENDPOINTS))
        return _error(exc.status_code, "HTTP_ERROR", str(exc.detail))


def create_app(store_path: str | Path, *, default_target: str | None = None,
               hosts: tuple[str, ...] | None = None, source: str = "local", kusto: KustoOrigin | None = None) -> Any:
    """The ASGI app serving one store read-only (``hosts``: see :func:`allowed_hosts`); with ``kusto`` and
    ``source`` ``kusto`` or ``auto``, targets are read from the durable history as well (:mod:`.kusto`)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException
    from starlette.routing import Route

    h = _Handlers(store_path, default_target, source, kusto)
    methods = ["GET", "HEAD"]
    routes = [
        Route("/", h.guarded(h.index), methods=methods),
        Route("/healthz", h.healthz, methods=methods),
        Route("/stellar", h.guarded(h.page), methods=methods),
        Route("/api/stellar/snapshot", h.guarded(h.snapshot), methods=methods),
        Route("/api/stellar/series", h.guarded(h.series), methods=methods),
        Route("/api/stellar/artifacts", h.guarded(h.artifacts), methods=methods),
        Route("/api/stellar/artifact", h.guarded(h.artifact), methods=methods),
    ]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _Handlers.http_error})
    return SecurityHeaders(HostAllowlist(app, allowed_hosts() if hosts is None else hosts))


def bind(host: str = DEFAULT_HOST, port: int = 0) -> socket.socket:
    """A listening socket on ``host:port`` (port 0 picks a free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}",
                         hint="pick another --port (0 chooses a free one) or --host") from None
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def url_for(sock: socket.socket, path: str = "") -> str:
    host, port = sock.getsockname()[:2]
    if host in ("0.0.0.0", "::"):
        host = "127.0.0.1"
    if ":" in host:
        host = f"[{host}]"
    return f"http://{host}:{port}{path}"


def serve(sock: socket.socket, store_path: str | Path, *, default_target: str | None = None,
          source: str = "local", kusto: KustoOrigin | None = None) -> None:
    """Run uvicorn on ``sock`` until interrupted."""
    import uvicorn

    hosts = allowed_hosts(str(sock.getsockname()[0]))
    app = create_app(store_path, default_target=default_target, hosts=hosts, source=source, kusto=kusto)
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan="off", server_header=False)
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
