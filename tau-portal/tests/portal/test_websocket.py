"""WebSocket pass-through of the Ray and KueueViz proxies, against a real WebSocket server (starlette + uvicorn on
127.0.0.1) that the Portal reaches as a head Service discovered in the simulated cluster."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from websockets.exceptions import InvalidStatus
from websockets.sync.client import connect

from tau_core import keys


class Upstream:
    """A real WebSocket server: greets with its path, echoes, and records each handshake's headers."""

    def __init__(self) -> None:
        import socket

        import uvicorn
        from starlette.applications import Starlette
        from starlette.routing import WebSocketRoute

        self.seen: list[dict[str, str]] = []

        async def echo(ws: Any) -> None:
            from starlette.responses import Response

            self.seen.append({"path": ws.url.path, "query": ws.url.query,
                              **{k.lower(): v for k, v in ws.headers.items()}})
            if ws.url.path.endswith("/redirect"):  # a hostile upstream points the handshake elsewhere
                await ws.send_denial_response(Response(status_code=302, headers={"Location": "/landed"}))
                return
            await ws.accept()
            await ws.send_text(f"hello {ws.url.path}")
            async for text in ws.iter_text():
                await ws.send_text(f"echo:{text}")

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        app = Starlette(routes=[WebSocketRoute("/{rest:path}", echo)])
        self.server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            assert time.monotonic() < deadline, "the upstream WebSocket server did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.sock.close()


@pytest.fixture
def upstream() -> Iterator[Upstream]:
    server = Upstream()
    yield server
    server.stop()


def ws_url(portal: Any, path: str) -> str:
    return portal.url.replace("http://", "ws://") + path


def status_of(url: str, **headers: str) -> int:
    with pytest.raises(InvalidStatus) as refused:
        connect(url, additional_headers=headers, open_timeout=20).close()
    return int(refused.value.response.status_code)


def ray_cluster(scenario: Any) -> None:
    from tau_testing.sim.scripts import PodScript, ScriptBook

    cluster = scenario.cluster
    cluster.scripts = cluster.scripts or ScriptBook()
    cluster.scripts.add("ray-ws", PodScript(run_seconds=None), kind="RayJob")
    cluster.store.create({"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "metadata": {"name": "ray-ws", "namespace": "aurora",
                                       "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                                                  keys.KUEUE_QUEUE_NAME: "jobqueue"}},
                          "spec": {"entrypoint": "python serve.py", "suspend": True, "rayClusterSpec": {
                              "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                                  {"name": "head", "image": "rayproject/ray:2.9",
                                   "resources": {"requests": {"cpu": "1"}}}]}}}, "workerGroupSpecs": []}}})
    cluster.settle()
    cluster.advance(5)
    cluster.settle()


def test_ray_websocket_passes_through_to_a_discovered_head_only(taugrid_cluster, portal_factory, upstream) -> None:
    ray_cluster(taugrid_cluster)
    portal = portal_factory(taugrid_cluster.cluster, namespace="aurora",
                            ray_upstream=f"http://127.0.0.1:{upstream.port}")
    board = portal.wait("/api/portal/ray", lambda r: r.status_code == 200 and r.json()["clusters"]
                        and r.json()["clusters"][0]["ready"], timeout=30).json()
    proxy = board["clusters"][0]["proxyPath"]
    same = {"Origin": portal.url, "Cookie": "session=secret; ray_target=x"}
    with connect(ws_url(portal, proxy + "api/logs/stream?lines=5"), additional_headers=same, open_timeout=20) as ws:
        assert ws.recv(timeout=20) == "hello /api/logs/stream"
        ws.send("ping")
        assert ws.recv(timeout=20) == "echo:ping"
    seen = upstream.seen[-1]
    assert seen["query"] == "lines=5" and "cookie" not in seen and "origin" not in seen
    count = len(upstream.seen)
    origin = {"Origin": portal.url}
    assert status_of(ws_url(portal, proxy + "api/x"), Origin="http://evil.example") == 403
    assert status_of(ws_url(portal, "/api/portal/ray/proxy/aurora/unknown/api/x"), **origin) == 404
    assert status_of(ws_url(portal, "/api/portal/ray/proxy/kube-system/ray-ws/api/x"), **origin) == 404
    assert status_of(ws_url(portal, proxy + "%2e%2e/%2e%2e/admin"), **origin) == 400
    assert status_of(ws_url(portal, proxy + "worker/traceback"), **origin) == 403
    assert status_of(ws_url(portal, "/api/events/stream"), **origin) == 400  # no ray_target cookie
    assert status_of(ws_url(portal, "/stellar"), **origin) == 404
    assert len(upstream.seen) == count, "a refused upgrade never reaches the upstream"
    target = f"ray_target={board['clusters'][0]['namespace']}/{board['clusters'][0]['cluster']}"
    with connect(ws_url(portal, "/api/events/stream"), additional_headers={**origin, "Cookie": target},
                 open_timeout=20) as ws:  # the dashboard's root-relative URL, routed by the cookie
        assert ws.recv(timeout=20) == "hello /api/events/stream"
    assert status_of(ws_url(portal, "/api/events/stream"), Cookie="ray_target=kube-system/apiserver") == 404
    assert status_of(ws_url(portal, proxy + "api/redirect"), **origin) == 502
    assert upstream.seen[-1]["path"] == "/api/redirect", "the proxy never follows a redirect"
    upstream.stop()
    assert status_of(ws_url(portal, proxy + "api/logs/stream"), **origin) == 502


def test_kueueviz_websocket_gets_the_allowed_origin_and_no_cookie(taugrid_cluster, portal_factory,
                                                                  upstream) -> None:
    from taugrid_portal.portal.config import KueueVizConfig

    portal = portal_factory(taugrid_cluster.cluster, kueueviz=KueueVizConfig(),
                            kueueviz_upstream=f"http://127.0.0.1:{upstream.port}")
    url = ws_url(portal, "/api/portal/kueueviz/ws/cluster-queues?ns=aurora")
    with connect(url, additional_headers={"Origin": portal.url, "Cookie": "kueueviz_target=1; s=secret"},
                 open_timeout=20) as ws:
        assert ws.recv(timeout=20) == "hello /ws/cluster-queues"
        ws.send("subscribe")
        assert ws.recv(timeout=20) == "echo:subscribe"
    seen = upstream.seen[-1]
    assert seen["origin"] == "http://portal.kueueviz.local" and "cookie" not in seen
    assert seen["query"] == "ns=aurora"
    assert status_of(url, Origin="https://evil.example") == 403
    assert status_of(ws_url(portal, "/api/portal/kueueviz/ws/a/%2e%2e/b"), Origin=portal.url) in (400, 404)
    off = portal_factory(taugrid_cluster.cluster)
    assert status_of(ws_url(off, "/api/portal/kueueviz/ws/cluster-queues"), Origin=off.url) in (403, 404)


def test_managed_kueueviz_needs_an_authorized_viewer(taugrid_cluster, portal_factory, upstream, tmp_path) -> None:
    """In managed mode the KueueViz board, cluster-wide by nature, is no way around the identity headers."""
    import json

    import httpx

    from taugrid_portal.portal.config import KueueVizConfig
    from taugrid_portal.portal.directory import load_directory

    path = tmp_path / "workspaces.json"
    path.write_text(json.dumps({"localCluster": "local", "workspaces": [
        {"id": "aurora", "cluster": "local", "namespace": "aurora", "source": "local",
         "authorization": {"mode": "workspace-rbac", "users": ["alice@example.com"]}}]}))
    portal = portal_factory(taugrid_cluster.cluster, kueueviz=KueueVizConfig(), workspace_directory=path,
                            directory=load_directory(path), kueueviz_upstream=f"http://127.0.0.1:{upstream.port}")
    alice = {"X-MS-CLIENT-PRINCIPAL-NAME": "alice@example.com"}
    for route in ("/api/portal/kueueviz/env.js", "/api/portal/kueueviz/", "/assets/index.js"):
        anonymous = httpx.get(portal.url + route, headers={"Cookie": "kueueviz_target=1"})
        assert anonymous.status_code == 401, (route, anonymous.text)
        assert anonymous.json()["reason"] == "authenticated viewer identity is required"
        stranger = httpx.get(portal.url + route, headers={"X-MS-CLIENT-PRINCIPAL-NAME": "mallory"})
        assert stranger.status_code == 403, route
    assert portal.get("/api/portal/kueueviz/env.js", headers=alice).status_code == 200
    url = ws_url(portal, "/api/portal/kueueviz/ws/cluster-queues")
    assert status_of(url, Origin=portal.url) == 401
    before = len(upstream.seen)
    with connect(url, additional_headers={"Origin": portal.url, **alice}, open_timeout=20) as ws:
        assert ws.recv(timeout=20) == "hello /ws/cluster-queues"
    assert len(upstream.seen) == before + 1 and "x-ms-client-principal-name" not in upstream.seen[-1]
