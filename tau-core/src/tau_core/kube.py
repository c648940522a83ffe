"""The one small Kubernetes session type, over ``kubernetes-asyncio``.

:class:`KubeSession` loads a kubeconfig (an explicit path, ``KUBECONFIG`` or ``~/.kube/config``),
selects a context, and sends plain REST calls through the library's ``ApiClient`` so that every
authentication mechanism the library supports (tokens, client certificates, exec plugins) works.
Bodies are plain dicts; nothing is deserialized into generated models.

* Idempotent reads (GET, list, logs) retry with exponential backoff on 429 (honouring
  ``Retry-After``), 5xx and connection errors.  Writes are never retried here: when the outcome
  of a write is unknown the session raises :class:`WriteOutcomeUnknown` and the caller decides
  (the submit path recovers through its submission-id annotation).
* Every HTTP request is counted (:attr:`KubeSession.requests`) for benchmarks.
* API failures become :class:`KubeApiError` (a :class:`~tau_core.errors.ClusterError`) with a
  one-line message and a hint: unreachable server, rejected credential, forbidden verb, a
  resource type the cluster does not serve ("not a TauGrid cluster").

``kubernetes_asyncio`` is imported inside functions only; importing this module is cheap.
Commands call the async API through :func:`run` (:func:`tau_core.aio.run`, on anyio) at the edge.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import os
import random
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

from tau_core import keys
from tau_core.aio import run
from tau_core.errors import ClusterError
from tau_core.kubeconfig import (
    ENV_KUBECONFIG,
    IN_CLUSTER,
    KubeConfig,
    in_cluster_config,
    is_private,
    kubeconfig_paths,
    write_private_kubeconfig,
)

T = TypeVar("T")

ENV_CONTEXT = "TAU_CONTEXT"
ENV_SYSTEM_NAMESPACE = "TAU_SYSTEM_NAMESPACE"
ENV_REQUEST_TIMEOUT = "TAU_REQUEST_TIMEOUT"
DEFAULT_REQUEST_TIMEOUT = 30.0
DEFAULT_SYSTEM_NAMESPACE = keys.SYSTEM_NAMESPACE_DEFAULT
RETRYABLE_STATUS = frozenset({429, 500, 502, 503, 504})

#: API groups whose absence means "this cluster is missing a component", with the hint to give.
_GROUP_HINTS: dict[str, tuple[str, str]] = {
    keys.API_GROUP: ("it is not a TauGrid cluster (the TauGrid CRDs are not installed)",
                      "install TauGrid with `tau cluster install`, or pass --context to select the TauGrid cluster"),
    "kueue.x-k8s.io": ("Kueue is not installed on this cluster",
                       "install TauGrid (which brings Kueue) with `tau cluster install`, or pass --context"),
    "ray.io": ("KubeRay is not installed on this cluster",
               "install TauGrid (which brings KubeRay) with `tau cluster install`, or pass --context"),
}


# -- errors ------------------------------------------------------------------------------------

class KubeApiError(ClusterError):
    """The API server refused a request (or could not be reached)."""

    def __init__(self, message: str, *, hint: str | None = None, status: int = 0, reason: str = "",
                 body: Mapping[str, Any] | None = None) -> None:
        super().__init__(message, hint=hint)
        self.status = status
        self.reason = reason
        self.body = dict(body or {})

    @property
    def not_found(self) -> bool:
        return self.status == 404

    @property
    def already_exists(self) -> bool:
        return self.status == 409 and self.reason == "AlreadyExists"


class WriteOutcomeUnknown(KubeApiError):
    """A write was sent but no answer came back: it may or may not have been applied."""


# -- retry policy ------------------------------------------------------------------------------

@dataclass(frozen=True)
class RetryPolicy:
    """Exponential backoff for idempotent reads."""

    attempts: int = 6
    base: float = 0.05
    cap: float = 2.0
    max_retry_after: float = 10.0

    def delay(self, attempt: int, retry_after: str | None = None) -> float:
        """Seconds to wait before retry number ``attempt`` (1-based)."""
        if retry_after:
            try:
                return min(float(retry_after), self.max_retry_after)
            except ValueError:
                pass
        backoff: float = min(self.cap, self.base * (2 ** (attempt - 1)))
        return backoff * (0.5 + random.random() / 2)


# -- paths -------------------------------------------------------------------------------------

def api_path(api_version: str, plural: str, *, namespace: str | None = None, name: str | None = None,
             subresource: str | None = None) -> str:
    """The REST path of a collection or object: ``/api/v1/...`` or ``/apis/<group>/<version>/...``."""
    base = f"/api/{api_version}" if "/" not in api_version else f"/apis/{api_version}"
    parts = [base]
    if namespace:
        parts.append(f"namespaces/{quote(namespace, safe='')}")
    parts.append(plural)
    if name:
        parts.append(quote(name, safe=""))
    if subresource:
        parts.append(subresource)
    return "/".join(parts)


def _describe_path(path: str) -> tuple[str, str, str | None, str | None]:
    """``(group, resource, namespace, name)`` from a REST path, for error messages."""
    segments = [s for s in path.split("?")[0].split("/") if s]
    group = ""
    if segments[:1] == ["api"]:
        rest = segments[2:]
    elif segments[:1] == ["apis"] and len(segments) >= 3:
        group = segments[1]
        rest = segments[3:]
    else:
        return "", path, None, None
    namespace = None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        namespace, rest = rest[1], rest[2:]
    elif rest[:1] == ["namespaces"] and len(rest) == 2:
        return group, "namespaces", None, rest[1]
    resource = rest[0] if rest else ""
    name = rest[1] if len(rest) > 1 else None
    if len(rest) > 2:
        resource = f"{resource}/{rest[2]}"
    return group, resource, namespace, name


def _verb(method: str, path: str, query: Mapping[str, Any] | None) -> str:
    _, _, _, name = _describe_path(path)
    if method == "GET":
        if query and str(query.get("watch", "")).lower() in ("1", "true"):
            return "watch"
        return "get" if name else "list"
    return {"POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())


# -- the session -------------------------------------------------------------------------------

class KubeSession:
    """An open connection to one cluster (one kubeconfig context).

    Use ``async with await KubeSession.connect(...) as session:`` or :meth:`close` explicitly.
    """

    def __init__(self, api_client: Any, *, server: str, context: str, namespace: str | None,
                 kubeconfig: builtins.list[Path], retry: RetryPolicy | None = None) -> None:
        self._api = api_client
        self.server = server
        self.context = context
        self.default_namespace = namespace
        self.kubeconfig = kubeconfig
        self.retry = retry or RetryPolicy()
        self.requests = 0
        self.retries = 0
        self.timeout = _request_timeout()

    # -- construction ---------------------------------------------------------------------
    @classmethod
    async def connect(cls, *, kubeconfig: str | os.PathLike[str] | None = None, context: str | None = None,
                      retry: RetryPolicy | None = None, env: Mapping[str, str] | None = None) -> KubeSession:
        """Load the kubeconfig, select ``context`` (default: the current context) and open a client."""
        from tau_core.kubeclient import load_client

        config = KubeConfig.load(kubeconfig, env)
        name, _ = config.context(context)
        server = config.server(name)
        api_client = await load_client(config.isolate(name), name)
        return cls(api_client, server=server, context=name, namespace=config.namespace(name),
                   kubeconfig=config.paths, retry=retry)

    @classmethod
    async def connect_in_cluster(cls, *, retry: RetryPolicy | None = None,
                                 env: Mapping[str, str] | None = None) -> KubeSession | None:
        """A session as the pod's ServiceAccount, or None when this process does not run in a pod."""
        from tau_core.kubeclient import load_client

        config = in_cluster_config(env)
        if config is None:
            return None
        api_client = await load_client(config, IN_CLUSTER)
        return cls(api_client, server=config["clusters"][0]["cluster"]["server"], context=IN_CLUSTER,
                   namespace=None, kubeconfig=[], retry=retry)

    @classmethod
    async def require_in_cluster(cls, *, flag: str = "--in-cluster") -> KubeSession:
        """:meth:`connect_in_cluster`, or a one-line error naming ``flag`` when this process does not run in a pod."""
        session = await cls.connect_in_cluster()
        if session is None:
            raise ClusterError(f"{flag}: not running in a pod (no KUBERNETES_SERVICE_HOST or ServiceAccount token)",
                               hint="use --kubeconfig/--context outside a cluster")
        return session

    async def close(self) -> None:
        await self._api.close()

    async def __aenter__(self) -> KubeSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- plain REST -------------------------------------------------------------------------
    async def _send(self, method: str, path: str, *, query: Mapping[str, Any] | None = None,
                    body: Any = None, content_type: str = "application/json", timeout: float | None = -1.0) -> Any:
        """One HTTP request; returns the aiohttp response (the caller reads and releases it)."""
        if timeout is not None and timeout < 0:
            timeout = self.timeout
        self.requests += 1
        headers = {"Accept": "application/json", "Content-Type": content_type}
        params = [(k, str(v).lower() if isinstance(v, bool) else v) for k, v in (query or {}).items()
                  if v is not None]
        return await self._api.call_api(
            path, method, query_params=params, header_params=headers, body=body,
            auth_settings=["BearerToken"], _preload_content=False, _request_timeout=timeout,
        )

    async def request(self, method: str, path: str, *, query: Mapping[str, Any] | None = None, body: Any = None,
                      content_type: str = "application/json", raw: bool = False,
                      timeout: float | None = -1.0) -> Any:
        """Send a request; reads are retried, writes are not.  Returns the decoded JSON (or text with ``raw``)."""
        import aiohttp

        idempotent = method in ("GET", "HEAD")
        attempt = 0
        while True:
            attempt += 1
            try:
                response = await self._send(method, path, query=query, body=body, content_type=content_type,
                                            timeout=timeout)
                try:
                    data = await response.read()
                finally:
                    response.release()
            except (TimeoutError, aiohttp.ClientError, OSError) as exc:
                if idempotent and attempt < self.retry.attempts:
                    self.retries += 1
                    await asyncio.sleep(self.retry.delay(attempt))
                    continue
                raise self._connection_error(method, path, exc) from exc
            status = response.status
            if 200 <= status < 300:
                if raw:
                    return data.decode("utf-8", "replace")
                return json.loads(data) if data else {}
            if status in RETRYABLE_STATUS and idempotent and attempt < self.retry.attempts:
                self.retries += 1
                await asyncio.sleep(self.retry.delay(attempt, response.headers.get("Retry-After")))
                continue
            raise self._api_error(method, path, query, status, data)

    async def get(self, path: str, *, query: Mapping[str, Any] | None = None,
                  missing_ok: bool = False) -> dict[str, Any] | None:
        try:
            result: dict[str, Any] = await self.request("GET", path, query=query)
        except KubeApiError as exc:
            if missing_ok and exc.not_found and exc.body.get("details", {}).get("name"):
                return None
            raise
        return result

    async def list(self, path: str, *, label_selector: str | None = None, field_selector: str | None = None,
                   limit: int | None = None) -> dict[str, Any]:
        query = {"labelSelector": label_selector, "fieldSelector": field_selector, "limit": limit}
        result: dict[str, Any] = await self.request("GET", path, query=query)
        return result

    async def list_items(self, path: str, **kwargs: Any) -> builtins.list[dict[str, Any]]:
        return list((await self.list(path, **kwargs)).get("items") or [])

    async def create(self, path: str, body: Mapping[str, Any], *, dry_run: bool = False) -> dict[str, Any]:
        result: dict[str, Any] = await self.request("POST", path, body=dict(body),
                                                    query={"dryRun": "All" if dry_run else None})
        return result

    async def delete(self, path: str, *, propagation: str | None = "Background", uid: str | None = None,
                     missing_ok: bool = True) -> dict[str, Any] | None:
        body: dict[str, Any] = {"kind": "DeleteOptions", "apiVersion": "v1"}
        if propagation:
            body["propagationPolicy"] = propagation
        if uid:
            body["preconditions"] = {"uid": uid}
        try:
            result: dict[str, Any] = await self.request("DELETE", path, body=body)
        except KubeApiError as exc:
            if missing_ok and exc.not_found and exc.body.get("details", {}).get("name"):
                return None
            raise
        return result

    async def patch(self, path: str, body: Any, *, kind: str = "merge") -> dict[str, Any]:
        content_type = {"merge": "application/merge-patch+json", "json": "application/json-patch+json",
                        "strategic": "application/strategic-merge-patch+json"}[kind]
        result: dict[str, Any] = await self.request("PATCH", path, body=body, content_type=content_type)
        return result

    async def text(self, path: str, *, query: Mapping[str, Any] | None = None) -> str:
        """A plain-text read (pod logs), retried like any read."""
        result: str = await self.request("GET", path, query=query, raw=True)
        return result

    async def stream_lines(self, path: str, *, query: Mapping[str, Any] | None = None) -> AsyncIterator[str]:
        """Stream a long-running plain-text read (``logs?follow=true``) line by line."""
        import aiohttp

        try:
            response = await self._send("GET", path, query=query, timeout=None)
        except (TimeoutError, aiohttp.ClientError, OSError) as exc:
            raise self._connection_error("GET", path, exc) from exc
        try:
            if not 200 <= response.status < 300:
                raise self._api_error("GET", path, query, response.status, await response.read())
            buffer = b""
            async for chunk in response.content.iter_any():
                buffer += chunk
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    yield line.decode("utf-8", "replace")
            if buffer:
                yield buffer.decode("utf-8", "replace")
        except (aiohttp.ClientPayloadError, aiohttp.ServerDisconnectedError):
            return
        finally:
            response.release()

    async def watch(self, path: str, *, resource_version: str | None = None, label_selector: str | None = None,
                    field_selector: str | None = None, timeout_seconds: int = 300) -> AsyncIterator[dict[str, Any]]:
        """Watch a collection: yields ``{"type": ..., "object": ...}`` events until the server ends the stream."""
        query = {"watch": "true", "resourceVersion": resource_version, "labelSelector": label_selector,
                 "fieldSelector": field_selector, "timeoutSeconds": timeout_seconds,
                 "allowWatchBookmarks": "true"}
        async for line in self.stream_lines(path, query=query):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                continue
            if event.get("type") == "ERROR":
                obj = event.get("object") or {}
                raise KubeApiError(str(obj.get("message", "watch failed")), status=int(obj.get("code") or 0),
                                   reason=str(obj.get("reason", "")), body=obj)
            yield event

    # -- error mapping -----------------------------------------------------------------------
    def _connection_error(self, method: str, path: str, exc: BaseException) -> KubeApiError:
        detail = str(exc).strip() or type(exc).__name__
        if method in ("GET", "HEAD"):
            return KubeApiError(
                f"cannot reach the Kubernetes API server at {self.server} (context \"{self.context}\"): {detail}",
                hint="check that the cluster is running and reachable from here (VPN, DNS, private network), "
                     "and that --context or TAU_CONTEXT names the right cluster",
            )
        _, resource, namespace, name = _describe_path(path)
        where = f"{namespace}/" if namespace else ""
        return WriteOutcomeUnknown(
            f"the connection to {self.server} was lost during {_verb(method, path, None)} of {resource} "
            f"{where}{name or ''}".rstrip() + f"; it may or may not have been applied ({detail})",
            hint="check the object's state before repeating the command",
        )

    def _api_error(self, method: str, path: str, query: Mapping[str, Any] | None, status: int,
                   data: bytes) -> KubeApiError:
        try:
            body = json.loads(data) if data else {}
        except ValueError:
            body = {"message": data.decode("utf-8", "replace")[:200]}
        if not isinstance(body, dict):
            body = {}
        reason = str(body.get("reason", ""))
        message = str(body.get("message", "")).strip() or f"HTTP {status}"
        group, resource, namespace, name = _describe_path(path)
        qualified = f"{resource}.{group}" if group else resource
        verb = _verb(method, path, query)
        scope = f" in namespace \"{namespace}\"" if namespace else " at cluster scope"
        kw: dict[str, Any] = {"status": status, "reason": reason, "body": body}
        if status == 401:
            return KubeApiError(
                f"the API server at {self.server} rejected the credential for context \"{self.context}\" "
                "(401 Unauthorized): it is missing, expired or invalid",
                hint="sign in again or refresh the kubeconfig credential (for AKS: az login, then "
                     "`tau workspace connection`), then retry", **kw)
        if status == 403:
            return KubeApiError(
                f"forbidden: you may not {verb} {qualified}{scope} (context \"{self.context}\")",
                hint=f"ask your platform team to grant '{verb}' on {qualified}{scope} — researchers normally get "
                     "it through the tau-researcher-v1 role of their TauWorkspace", **kw)
        if status == 404 and not (body.get("details") or {}).get("name") and group in _GROUP_HINTS:
            what, hint = _GROUP_HINTS[group]
            return KubeApiError(f"the cluster at {self.server} does not serve {qualified}: {what}", hint=hint, **kw)
        if status == 404 and not (body.get("details") or {}).get("name") and not name:
            return KubeApiError(f"the cluster at {self.server} does not serve {qualified}",
                                hint="check that the required component is installed on this cluster", **kw)
        if status == 404:
            where = f"{namespace}/" if namespace else ""
            return KubeApiError(f"{qualified} {where}{name} not found", **kw)
        if status in RETRYABLE_STATUS:
            return KubeApiError(
                f"the API server at {self.server} kept failing ({status} {reason or 'error'}) for {verb} "
                f"{qualified}: {message}", hint="the cluster is overloaded or degraded; retry in a moment", **kw)
        return KubeApiError(f"{verb} {qualified}{scope} failed ({status} {reason}): {message}", **kw)


def _request_timeout() -> float:
    """Seconds one request may take (``TAU_REQUEST_TIMEOUT``, like kubectl's --request-timeout)."""
    value = os.environ.get(ENV_REQUEST_TIMEOUT, "")
    try:
        seconds = float(value) if value else DEFAULT_REQUEST_TIMEOUT
    except ValueError:
        return DEFAULT_REQUEST_TIMEOUT
    return seconds if seconds > 0 else DEFAULT_REQUEST_TIMEOUT


def label_selector(labels: Mapping[str, str]) -> str:
    return ",".join(f"{k}={v}" for k, v in labels.items())


def encode_query(query: Mapping[str, Any]) -> str:
    return urlencode([(k, v) for k, v in query.items() if v is not None])


def condition(obj: Mapping[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The status condition of ``ctype`` on ``obj``, or None."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return dict(cond)
    return None


def is_true(obj: Mapping[str, Any] | None, ctype: str) -> bool:
    cond = condition(obj, ctype)
    return bool(cond and cond.get("status") == "True")


__all__: Sequence[str] = (
    "ENV_KUBECONFIG", "KubeApiError", "KubeConfig", "KubeSession", "RetryPolicy", "WriteOutcomeUnknown", "api_path",
    "condition", "is_private", "is_true", "kubeconfig_paths", "label_selector", "run", "write_private_kubeconfig",
)
