"""Helpers for tests against a SimCluster: kubernetes-asyncio clients from its kubeconfig, Status bodies."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any, TypeVar

T = TypeVar("T")


def run(coro: Awaitable[T]) -> T:
    return asyncio.run(coro)  # type: ignore[arg-type]


@contextlib.asynccontextmanager
async def api_client(cluster: Any, user: str = "admin") -> AsyncIterator[Any]:
    """A kubernetes-asyncio ApiClient built from the cluster's real kubeconfig file, for ``user``'s context."""
    from kubernetes_asyncio import config

    client = await config.new_client_from_config(config_file=str(cluster.kubeconfig_path),
                                                 context=cluster.context_for(user))
    try:
        yield client
    finally:
        await client.close()


def status_of(exc: Any) -> dict[str, Any]:
    """The Status body of an ApiException."""
    body: dict[str, Any] = json.loads(exc.body)
    return body


async def expect_api_error(coro: Awaitable[Any], code: int) -> dict[str, Any]:
    from kubernetes_asyncio.client.exceptions import ApiException

    try:
        await coro
    except ApiException as exc:
        assert exc.status == code, (exc.status, exc.body)
        body = status_of(exc)
        assert body["kind"] == "Status" and body["code"] == code and body["status"] == "Failure", body
        return body
    raise AssertionError(f"expected HTTP {code}")


def pod(name: str, namespace: str = "default", labels: dict[str, str] | None = None,
        containers: list[str] | None = None, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": labels or {}},
        "spec": {"containers": [{"name": c, "image": "busybox:1.36"} for c in (containers or ["main"])], **spec},
    }


def configmap(name: str, namespace: str = "default", **meta: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": namespace, **meta},
            "data": {"k": "v"}}


async def collect(gen: Any, count: int, predicate: Callable[[Any], bool] | None = None) -> list[Any]:
    out: list[Any] = []
    async for item in gen:
        if predicate is None or predicate(item):
            out.append(item)
        if len(out) >= count:
            break
    return out
