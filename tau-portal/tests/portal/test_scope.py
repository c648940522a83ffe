"""Managed scope (workspace directory + identity headers), the Ray proxy's SSRF guard, and the command line."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tau_core.errors import ConfigError
from taugrid_portal.portal.directory import load_directory

USER = "X-MS-CLIENT-PRINCIPAL-NAME"
GROUPS = "X-MS-CLIENT-PRINCIPAL-GROUPS"


def directory(tmp: Path, **changes) -> Path:
    doc = {"localCluster": "local",
           "endpoints": [{"cluster": "west", "endpoint": "https://portal.west.example", "availability": "available"}],
           "workspaces": [
               {"id": "aurora", "name": "Aurora", "cluster": "local", "team": "Vision_Team", "namespace": "aurora",
                "localQueue": "jobqueue", "source": "local", "default": True,
                "authorization": {"mode": "workspace-rbac", "users": ["Alice@Example.com"], "groups": ["g-aurora"]}},
               {"id": "borealis", "cluster": "west", "team": "nlp", "namespace": "borealis", "localQueue": "q",
                "source": "local", "authorization": {"mode": "workspace-rbac", "users": ["alice@example.com"]}},
               {"id": "secret", "cluster": "local", "team": "x", "namespace": "secret", "localQueue": "q",
                "source": "local", "authorization": {"mode": "workspace-rbac", "groups": ["g-secret"]}}]}
    for key, value in changes.items():
        path = key.split("__")
        target = doc
        for part in path[:-1]:
            target = target[int(part)] if part.isdigit() else target[part]
        target[path[-1]] = value
    p = tmp / "workspaces.json"
    p.write_text(json.dumps(doc))
    return p


@pytest.mark.parametrize(("change", "message"), [
    ({"extra": 1}, "$.extra: unknown field"),
    ({"localCluster": ""}, "$.localCluster: is required"),
    ({"workspaces": []}, "needs at least one workspace"),
    ({"endpoints__0__endpoint": "http://portal.west.example"}, "https:// origin"),
    ({"endpoints__0__endpoint": "https://u:p@portal.west.example"}, "https:// origin"),
    ({"endpoints__0__availability": "maybe"}, "availability: must be one of"),
    ({"workspaces__1__id": "aurora"}, "workspace id is listed twice"),
    ({"workspaces__1__default": True}, "at most one workspace"),
    ({"workspaces__0__authorization": {"mode": "workspace-rbac"}}, "needs at least one user or group"),
    ({"workspaces__0__authorization": {"mode": "open", "users": ["a"]}}, "mode: must be one of"),
    ({"workspaces__0__experimentsUrl": "https://exp.example"}, "requires source kusto"),
    ({"workspaces__0__namespace": ""}, "namespace: is required"),
    ({"workspaces__0__id": "a|b; Secure"}, "a DNS label"),
    ({"workspaces__0__surprise": 1}, "surprise: unknown field"),
    ({"workspaces__0__source": "kusto", "workspaces__0__experimentsBackend": {"url": "http://exp.example"}},
     "experimentsBackend.url: must be an https:// URL"),
    ({"workspaces__0__source": "kusto", "workspaces__0__experimentsBackend": {"url": "https://u:p@exp.example"}},
     "without credentials"),
    ({"workspaces__0__source": "kusto", "workspaces__0__experimentsBackend": {}}, "experimentsBackend.url: is required"),
    ({"workspaces__0__source": "kusto",
      "workspaces__0__experimentsBackend": {"url": "https://exp.example", "bearerTokenFile": "token"}},
     "bearerTokenFile: must be an absolute path"),
])
def test_directory_is_strict(tmp_path: Path, change: dict, message: str) -> None:
    with pytest.raises(ConfigError) as err:
        load_directory(directory(tmp_path, **change))
    assert message in err.value.message


def test_directory_accepts_in_cluster_and_https_experiment_backends(tmp_path: Path) -> None:
    for url in ("http://stellar.aurora.svc:8080", "http://stellar.aurora.svc.cluster.local", "http://127.0.0.1:9",
                "https://exp.example"):
        load_directory(directory(tmp_path, workspaces__0__source="kusto", workspaces__0__experimentsBackend={
            "url": url, "bearerTokenFile": "/var/run/secrets/tau/token"}))


def test_directory_normalises_principals_and_teams(tmp_path: Path) -> None:
    d = load_directory(directory(tmp_path))
    aurora = d.workspaces[0]
    assert aurora.users == {"alice@example.com"} and aurora.team == "vision-team"


@pytest.fixture
def managed(populated, portal_factory, tmp_path: Path):
    return portal_factory(populated.cluster, workspace_directory=directory(tmp_path),
                          directory=load_directory(directory(tmp_path)))


def test_identity_headers_limits_and_authorization(managed) -> None:
    r = managed.get("/api/portal/runs")
    assert r.status_code == 401 and r.json()["reason"] == "authenticated viewer identity is required"
    r = managed.get("/api/portal/runs", headers={USER: "a" * 1025})
    assert r.status_code == 431
    r = managed.get("/api/portal/runs", headers={USER: "bob", GROUPS: ",".join(f"g{i}" for i in range(300))})
    assert r.status_code == 431 and "exceed supported limits" in r.json()["reason"]
    alice = {USER: "alice@example.com"}
    doc = managed.wait("/api/portal/runs", lambda r: r.status_code == 200, headers=alice).json()
    assert doc["scope"]["workspace"] == "aurora" and doc["scope"]["managed"] is True
    assert {r["namespace"] for r in doc["runs"]} == {"aurora"}
    ws = managed.get("/api/portal/workspaces", headers=alice).json()
    assert [w["workspace"] for w in ws["workspaces"]] == ["borealis", "aurora"] or \
        sorted(w["workspace"] for w in ws["workspaces"]) == ["aurora", "borealis"]
    assert managed.get("/api/portal/runs", headers=alice, params={"workspace": "secret"}).status_code == 403
    assert managed.get("/api/portal/runs", headers=alice, params={"workspace": "ghost"}).status_code == 404
    ok = managed.get("/api/portal/runs", headers={USER: "carol", GROUPS: "g-other;G-SECRET"})
    assert ok.status_code == 200 and ok.json()["scope"]["workspace"] == "secret"


def test_a_cluster_wide_workspace_is_still_only_for_its_users_and_groups(populated, portal_factory,
                                                                        tmp_path: Path) -> None:
    path = directory(tmp_path, workspaces__2__authorization={"mode": "cluster-wide", "groups": ["g-ops"]})
    portal = portal_factory(populated.cluster, workspace_directory=path, directory=load_directory(path))
    alice = {USER: "alice@example.com"}
    portal.wait("/api/portal/runs", lambda r: r.status_code == 200, headers=alice)
    mine = portal.get("/api/portal/workspaces", headers=alice).json()["workspaces"]
    assert sorted(w["workspace"] for w in mine) == ["aurora", "borealis"]
    assert portal.get("/api/portal/runs", headers=alice, params={"workspace": "secret"}).status_code == 403
    assert portal.get("/api/portal/runs", headers={USER: "mallory"}).status_code == 403
    ops = portal.get("/api/portal/runs", headers={USER: "olga", GROUPS: "g-ops"})
    assert ops.status_code == 200 and ops.json()["scope"]["authorizationMode"] == "cluster-wide"
    nodes = portal.wait("/api/portal/nodes", lambda r: r.status_code == 200, headers={USER: "olga", GROUPS: "g-ops"})
    assert "daemonSets" in nodes.json()
    assert "daemonSets" not in portal.get("/api/portal/nodes", headers=alice).json()


@pytest.mark.parametrize("param", ["namespace", "cluster", "team", "queue"])
def test_query_parameters_cannot_escape_the_resolved_scope(managed, param: str) -> None:
    r = managed.get("/api/portal/runs", headers={USER: "alice@example.com"}, params={param: "kube-system"})
    assert r.status_code == 400 and r.json()["error"] == f"{param} query conflicts with resolved workspace scope"
    d = managed.get("/api/portal/runs/kube-system/x", headers={USER: "alice@example.com"})
    assert d.status_code in (400, 403)


def test_a_workspace_served_elsewhere_redirects_only_to_its_https_portal(managed) -> None:
    r = managed.get("/api/portal/runs", headers={USER: "alice@example.com"},
                    params={"workspace": "borealis", "cluster": "west", "namespace": "borealis"})
    doc = r.json()
    assert r.status_code == 200 and doc["state"] == "redirect"
    assert doc["redirectUrl"].startswith("https://portal.west.example/api/portal/runs?")
    assert "namespace=" not in doc["redirectUrl"] and "workspace=borealis" in doc["redirectUrl"]


def test_ray_proxy_ssrf_guard(populated, portal) -> None:
    portal.wait("/api/portal/ray", lambda r: r.status_code == 200)
    cases = {
        "/api/portal/ray/proxy/aurora/unknown/": 404,
        "/api/portal/ray/proxy/kube-system/ray-1/": 404,
        "/api/portal/ray/proxy/aurora/": 400,
        "/api/portal/ray/proxy/aurora/x/%2e%2e/%2e%2e/etc/passwd": 400,
        "/api/portal/ray/proxy/aurora/x/%252e%252e/admin": 400,
        "/api/portal/ray/proxy/aurora/x//evil.example/": 400,
        "/api/portal/ray/proxy/169.254.169.254/latest/meta-data": 404,
        "/api/portal/ray/proxy/aurora/x/api/actors/kill": 403,
        "/api/portal/ray/proxy/aurora/x/worker/traceback": 403,
    }
    for path, status in cases.items():
        r = portal.client.get(path)
        assert r.status_code == status, (path, r.status_code, r.text)
        assert "set-cookie" not in r.headers


def test_cli_refuses_invalid_combinations(tmp_path: Path, capsys) -> None:
    from tau_core.cli import run
    from taugrid_portal.cli import cli

    cases = [
        (["--jobs-scope-mode", "operator"], "needs at least one --jobs-operator-scope"),
        (["--jobs-operator-scope", "a=b/c"], "only accepted with --jobs-scope-mode operator"),
        (["--jobs-scope-mode", "operator", "--jobs-operator-scope", "bad"], "must look like team=namespace/localQueue"),
        (["--jobs-scope-mode", "workspace"], "needs --workspace-directory"),
        (["--addr", "localhost"], "must be HOST:PORT"),
        (["--in-cluster", "--context", "x"], "--in-cluster cannot be combined"),
        (["--source", "kusto"], "needs --kusto-query-command or --kusto-endpoint"),
        (["--store", str(tmp_path / "none")], "no such directory"),
        (["--workspace-directory", str(directory(tmp_path, extra=1)), "--no-kubernetes"], "unknown field"),
    ]
    for args, message in cases:
        code = run(cli, ["portal", "serve", *args], prog_name="taugrid-portal")
        err = capsys.readouterr().err
        assert code in (1, 2) and message in err and "Traceback" not in err, (args, err)


def test_ray_proxy_forwards_reads_to_a_discovered_head_only(taugrid_cluster, portal_factory) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tau_core import keys
    from tau_testing.sim.scripts import PodScript, ScriptBook

    seen: list[dict[str, str]] = []

    class Dashboard(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            if self.path.startswith("/redirect"):
                self.send_response(302)
                self.send_header("Location", "http://169.254.169.254/")
                self.end_headers()
                return
            body = b'<html><script src="/static/main.js"></script></html>' if "cluster_status" in self.path \
                else b"asset"
            self.send_response(200)
            self.send_header("Content-Type", "text/html")
            self.send_header("Set-Cookie", "upstream=1")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    cluster = taugrid_cluster.cluster
    cluster.scripts = cluster.scripts or ScriptBook()
    cluster.scripts.add("ray-live", PodScript(run_seconds=None), kind="RayJob")
    cluster.store.create({"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "metadata": {"name": "ray-live", "namespace": "aurora",
                                       "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                                                  keys.KUEUE_QUEUE_NAME: "jobqueue"}},
                          "spec": {"entrypoint": "python serve.py", "suspend": True, "rayClusterSpec": {
                              "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                                  {"name": "head", "image": "rayproject/ray:2.9",
                                   "resources": {"requests": {"cpu": "1"}}}]}}}, "workerGroupSpecs": []}}})
    cluster.settle()
    cluster.advance(5)
    cluster.settle()
    port = upstream.server_address[1]
    portal = portal_factory(cluster, namespace="aurora", ray_upstream=f"http://127.0.0.1:{port}")
    try:
        board = portal.wait("/api/portal/ray", lambda r: r.status_code == 200 and r.json()["clusters"]
                            and r.json()["clusters"][0]["ready"], timeout=30).json()
        found = board["clusters"][0]
        r = portal.client.get(found["proxyPath"] + "api/cluster_status?x=1", headers={"Cookie": "session=secret"})
        assert r.status_code == 200
        assert r.text == f'<html><script src="{found["proxyPath"]}static/main.js"></script></html>'
        portal.client.cookies.clear()
        cookie = r.headers["set-cookie"]
        assert cookie.startswith(f"ray_target={found['namespace']}/{found['cluster']};")
        assert "HttpOnly" in cookie and "Secure" in cookie and "SameSite=Strict" in cookie
        assert "upstream=1" not in r.headers.get_list("set-cookie")
        assert seen[-1]["path"] == "/api/cluster_status?x=1" and "cookie" not in seen[-1]
        assert portal.client.get(found["proxyPath"] + "redirect").status_code == 502
        # root-relative dashboard URLs are routed by the cookie, re-checked against discovery every time
        asset = portal.client.get("/static/js/main.js", headers={"Cookie": cookie.split(";")[0]})
        assert asset.status_code == 200 and seen[-1]["path"] == "/static/js/main.js"
        import httpx

        fresh = httpx.get(portal.url + "/static/js/main.js")
        assert fresh.status_code == 400 and "open a cluster from the Ray board first" in fresh.json()["error"]
        forged = portal.client.get("/static/x", headers={"Cookie": "ray_target=kube-system/apiserver"})
        assert forged.status_code == 404
        assert portal.client.get("/static/x", headers={"Cookie": "ray_target=garbage"}).status_code == 400
        assert portal.client.get("/api/portal/nope", headers={"Cookie": cookie.split(";")[0]}).status_code == 404
        assert portal.client.post(found["proxyPath"] + "api/jobs/").status_code == 405
        assert len([s for s in seen if s["path"].startswith("/api/jobs")]) == 0
    finally:
        upstream.shutdown()


def test_managed_ray_proxy_cookie_names_the_workspace(taugrid_cluster, portal_factory, tmp_path: Path) -> None:
    """Managed mode: the viewer's identity is needed, the cookie is workspace|namespace|cluster, and a cookie
    naming another workspace is refused before anything is forwarded."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from tau_core import keys
    from tau_testing.sim.scripts import PodScript, ScriptBook

    class Dashboard(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Content-Length", "5")
            self.end_headers()
            self.wfile.write(b"asset")

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), Dashboard)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    cluster = taugrid_cluster.cluster
    cluster.scripts = cluster.scripts or ScriptBook()
    cluster.scripts.add("ray-live", PodScript(run_seconds=None), kind="RayJob")
    cluster.store.create({"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "metadata": {"name": "ray-live", "namespace": "aurora",
                                       "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                                                  keys.KUEUE_QUEUE_NAME: "jobqueue"}},
                          "spec": {"entrypoint": "python serve.py", "suspend": True, "rayClusterSpec": {
                              "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                                  {"name": "head", "image": "rayproject/ray:2.9",
                                   "resources": {"requests": {"cpu": "1"}}}]}}}, "workerGroupSpecs": []}}})
    cluster.settle()
    cluster.advance(5)
    cluster.settle()
    path = directory(tmp_path)
    portal = portal_factory(cluster, workspace_directory=path, directory=load_directory(path),
                            ray_upstream=f"http://127.0.0.1:{upstream.server_address[1]}")
    alice = {USER: "alice@example.com"}
    try:
        board = portal.wait("/api/portal/ray", lambda r: r.status_code == 200 and r.json()["clusters"]
                            and r.json()["clusters"][0]["ready"], timeout=30, headers=alice).json()
        found = board["clusters"][0]
        assert portal.client.get(found["proxyPath"] + "static/x.js").status_code == 401
        r = portal.client.get(found["proxyPath"] + "static/x.js", headers=alice)
        assert r.status_code == 200 and r.text == "asset"
        assert r.headers["set-cookie"].startswith(f"ray_target=aurora|{found['namespace']}|{found['cluster']};")
        portal.client.cookies.clear()
        mine = f"ray_target=aurora|{found['namespace']}|{found['cluster']}"
        assert portal.client.get("/static/x.js", headers={**alice, "Cookie": mine}).text == "asset"
        theirs = f"ray_target=secret|{found['namespace']}|{found['cluster']}"
        refused = portal.client.get("/static/x.js", headers={**alice, "Cookie": theirs})
        assert refused.status_code == 400 and refused.json()["error"] == "invalid Ray target cookie"
        legacy = f"ray_target={found['namespace']}/{found['cluster']}"
        assert portal.client.get("/static/x.js", headers={**alice, "Cookie": legacy}).status_code == 400
    finally:
        upstream.shutdown()


def test_kueueviz_board_proxy_cookie_and_origin_rules(taugrid_cluster, portal_factory) -> None:
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from taugrid_portal.portal.config import KueueVizConfig

    seen: list[dict[str, str]] = []

    class KueueViz(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append({"path": self.path, **{k.lower(): v for k, v in self.headers.items()}})
            html = self.path == "/"
            body = b'<html><script src="/assets/index.js"></script></html>' if html else b'{"ok":true}'
            self.send_response(200)
            self.send_header("Content-Type", "text/html" if html else "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    upstream = ThreadingHTTPServer(("127.0.0.1", 0), KueueViz)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    cluster = taugrid_cluster.cluster
    off = portal_factory(cluster)
    r = off.get("/api/portal/kueueviz/")
    assert r.status_code == 503 and "--kueueviz" in r.json()["reason"]
    port = upstream.server_address[1]
    portal = portal_factory(cluster, kueueviz=KueueVizConfig(),
                            kueueviz_upstream=f"http://127.0.0.1:{port}")
    try:
        env = portal.get("/api/portal/kueueviz/env.js")
        assert env.headers["cache-control"] == "no-store"
        assert f'"VITE_WEBSOCKET_URL": "ws://127.0.0.1:{portal.url.rsplit(":", 1)[1]}/api/portal/kueueviz"' in env.text
        assert portal.get("/api/portal/kueueviz/env.js", headers={"Host": 'x"</script>'}).status_code == 400
        assert portal.client.get("/assets/index.js").status_code == 400
        page = portal.get("/api/portal/kueueviz/", headers={"Cookie": "session=secret"})
        assert page.status_code == 200 and 'src="/api/portal/kueueviz/assets/index.js"' in page.text
        assert page.headers["set-cookie"] == "kueueviz_target=1; HttpOnly; Path=/; SameSite=Strict"
        assert "cookie" not in seen[-1] and "origin" not in seen[-1]
        ws = portal.get("/api/portal/kueueviz/ws/cluster-queues")
        assert ws.status_code == 200 and seen[-1]["origin"] == "http://portal.kueueviz.local"
        assert portal.client.get("/assets/index.js", headers={"Cookie": "kueueviz_target=1"}).status_code == 200
        assert seen[-1]["path"] == "/assets/index.js"
        assert portal.get("/api/portal/kueueviz/%2e%2e/secret").status_code == 400
    finally:
        upstream.shutdown()
    gone = portal_factory(cluster, kueueviz=KueueVizConfig(), kueueviz_upstream=f"http://127.0.0.1:{port}")
    assert gone.get("/api/portal/kueueviz/").status_code == 502


def test_managed_pages_need_an_identity_and_stay_in_scope(managed, make_job, populated) -> None:
    page = managed.get("/portal/runs")
    assert page.status_code == 401 and "authenticated viewer identity is required" in page.text
    alice = {USER: "alice@example.com"}
    populated.cluster.store.create(make_job("other-queue", labels={"kueue.x-k8s.io/queue-name": "other"}))
    # once the cache has synced (503 until then) and the watch has delivered the job (404 until then), it is out
    # of Alice's scope: 403, and not listed
    denied = managed.wait("/api/portal/runs/aurora/other-queue", lambda r: r.status_code not in (404, 503),
                          headers=alice)
    assert denied.status_code == 403, denied.text
    ok = managed.wait("/portal/runs", lambda r: r.status_code == 200, headers=alice)
    assert "runs-1" in ok.text and "other-queue" not in ok.text
    assert managed.get("/api/portal/runs/aurora/runs-1", headers=alice).status_code == 200


def test_without_kubernetes_the_kubernetes_boards_answer_503(taugrid_cluster, portal_factory) -> None:
    portal = portal_factory(taugrid_cluster.cluster, use_kubernetes=False)
    for board in ("runs", "nodes", "ray"):
        r = portal.get(f"/api/portal/{board}")
        assert r.status_code == 503 and r.json()["reason"].endswith("portal started without Kubernetes access")
    overview = portal.get("/api/portal/overview").json()
    assert overview["cards"]["fleetUnavailable"] == "portal started without Kubernetes access"
    assert overview["state"] == "no_data"
    assert portal.get("/healthz").json() == {"status": "ok"}
