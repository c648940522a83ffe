"""The Portal's JSON API against the simulated TauGrid cluster, read through the Portal's read-only role."""

from __future__ import annotations


def ready(r) -> bool:
    return r.status_code == 200


def test_runs_board_shows_every_state_with_the_reference_shape(populated, portal) -> None:
    doc = portal.wait("/api/portal/runs", lambda r: ready(r) and len(r.json()["runs"]) >= 6).json()
    assert doc["historyState"] == "live-only" and doc["state"] == "ready"
    assert doc["cache"]["fresh"] is True and doc["scope"]["workspace"] == "default"
    by = {r["name"]: r for r in doc["runs"]}
    print({n: r["status"] for n, r in by.items()})
    assert "external-1" not in by
    assert by["runs-1"]["status"] == "Running" and by["runs-1"]["runId"] == "r-1"
    assert by["fails-1"]["status"] == "Failed"
    assert by["runs-retried"]["attempt"] == 2
    assert by["waits-gpu"]["status"] in ("Suspended", "Pending")
    assert by["ray-1"]["kind"] == "RayJob"
    assert all(r["source"] == "tau" for r in doc["runs"])
    assert set(doc["runs"][0]) >= {"name", "kind", "runId", "namespace", "cluster", "resourceUid", "durableId",
                                   "source", "status", "created", "age", "queue", "experimentTracking",
                                   "experimentPath", "executionTarget"}
    ext = portal.get("/api/portal/runs", params={"include-external": "true"}).json()
    assert {r["name"]: r["source"] for r in ext["runs"]}["external-1"] == "external"
    submitters = [r for r in ext["runs"] if r["kind"] == "Job" and r["name"].startswith("ray-1")]
    assert not submitters, "KubeRay's submitter Job belongs to its RayJob"


def test_run_detail_reuses_the_cli_phase_tree_and_escapes_hostile_text(populated, portal) -> None:
    from tau_core.status_tree import phases
    from taugrid_portal.portal.runs import snapshot

    portal.wait("/api/portal/runs", lambda r: ready(r) and r.json()["total"] >= 6)
    doc = portal.get("/api/portal/runs/aurora/fails-1").json()
    assert doc["run"]["status"] == "Failed" and doc["terminal"] is True and doc["succeeded"] is False
    cache = portal.app.app.state.portal.cache
    expected = [p.name for p in phases(snapshot(cache, "aurora", "fails-1"))]
    assert [p["name"] for p in doc["phases"]] == expected
    assert doc["pods"] and doc["diagnostics"]["pods"] == "ready"
    assert "<img src=x onerror=alert(1)>" in doc["logs"]
    page = portal.get("/portal/runs/aurora/fails-1")
    assert page.status_code == 200
    assert "<img src=x" not in page.text and "&lt;img src=x onerror=alert(1)&gt;" in page.text
    hostile = portal.get("/api/portal/runs/aurora/xss-28").json()["run"]
    assert hostile["experimentPath"] == "/stellar?target=exp%26workspace%3Delsewhere%23x"  # one parameter, encoded
    xss = portal.get("/portal/runs/aurora/xss-28")
    assert "&lt;img src=x onerror=alert(1)&gt;" in xss.text and "<img src=x" not in xss.text
    missing = portal.get("/api/portal/runs/aurora/nope")
    assert missing.status_code == 404 and "not found" in missing.json()["error"]


def test_jobs_board_positions_reasons_and_scope_modes(populated, portal, portal_factory) -> None:
    doc = portal.wait("/api/portal/jobs", lambda r: ready(r) and r.json()["counts"]["pending"] >= 1).json()
    pending = [w for w in doc["workloads"] if w["state"] == "pending"]
    assert pending[0]["position"] == 0 and pending[0]["pendingReason"]
    assert any(w["state"] == "admitted" for w in doc["workloads"])
    assert portal.get("/api/portal/jobs", params={"team": "nobody"}).json()["state"] == "no_data"
    refused = portal.get("/api/portal/jobs", params={"namespace": "kube-system"})
    assert refused.status_code == 400 and "not allowed in operator Jobs mode" in refused.json()["error"]
    disabled = portal_factory(populated.cluster)
    r = disabled.get("/api/portal/jobs")
    assert r.status_code == 503 and "--jobs-scope-mode" in r.json()["reason"]


def test_nodes_and_overview_cards(populated, portal) -> None:
    nodes = portal.wait("/api/portal/nodes", ready).json()
    by = {n["name"]: n for n in nodes["nodes"]}
    assert set(by) == {"cpu-node-1", "cpu-node-2", "gpu-node-1"}
    assert by["gpu-node-1"]["gpuClass"] == "a100-80gb" and by["gpu-node-1"]["gpu"]["allocatable"] == 8
    assert nodes["gpuClasses"][0]["gpuClass"] == "a100-80gb"
    assert "daemonSets" in nodes
    overview = portal.wait("/api/portal/overview", ready).json()
    assert overview["cards"]["fleet"]["totalNodes"] == 3 and overview["cards"]["fleet"]["gpuNodes"] == 1
    assert [b["id"] for b in overview["boards"]][:2] == ["overview", "runs"]
    assert all(b["path"].endswith("?workspace=default") for b in overview["boards"])
    assert {r["name"] for r in overview["running"]} >= {"runs-1"}
    [running] = [r for r in overview["running"] if r["name"] == "runs-1"]
    assert set(running) == {"job", "name", "namespace", "runId", "queue", "clusterQueue", "project", "experiment",
                            "group", "experimentPath", "experimentTracking"}
    assert (running["runId"], running["queue"], running["clusterQueue"]) == ("r-1", "jobqueue", "tau-cq")
    slim = portal.get("/api/portal/overview", params={"view": "workloads"}).json()
    assert set(slim["cards"]) == {"queue", "queueUnavailable"} and "boards" not in slim
    assert {r["name"] for r in slim["running"]} == {r["name"] for r in overview["running"]}
    for b in overview["boards"]:  # every board link leads somewhere: a page, or a page saying why not
        page = portal.get(b["path"])
        assert page.status_code in (200, 503) and "text/html" in page.headers["content-type"], b
    for board in ("cluster", "cost", "nodeutil"):
        r = portal.get(f"/api/portal/{board}")
        assert r.status_code == 503 and "Kusto" in r.json()["reason"]


def test_security_headers_on_every_response_and_no_write_verb(portal) -> None:
    for path in ("/healthz", "/portal", "/api/portal/runs", "/nope", "/stellar", "/portal/static/portal.js"):
        r = portal.get(path)
        assert r.headers["x-content-type-options"] == "nosniff", path
        assert r.headers["x-frame-options"] == "SAMEORIGIN", path
        assert "content-security-policy" in r.headers, path
    for method in ("POST", "PUT", "PATCH", "DELETE", "OPTIONS", "TRACE", "PROPFIND"):
        for path in ("/api/portal/runs", "/portal", "/api/portal/ray/proxy/aurora/x/", "/healthz",
                     "/api/portal/kueueviz/ws/x", "/static/x"):
            r = portal.client.request(method, path)
            assert r.status_code == 405 and r.headers["x-content-type-options"] == "nosniff", (method, path)
        r = portal.client.request(method, "/api/stellar/snapshot")
        assert r.status_code == 403 and r.json()["error"] == "this Stellar route is not available in Portal"


def test_thousand_runs(taugrid_cluster, portal, make_job) -> None:
    store = taugrid_cluster.cluster.store
    for i in range(1000):
        store.create(make_job(f"bulk-{i:04d}"))
    doc = portal.wait("/api/portal/runs", lambda r: ready(r) and r.json()["total"] == 1000, timeout=60).json()
    assert len({r["name"] for r in doc["runs"]}) == 1000
    assert doc["runs"] == sorted(doc["runs"], key=lambda r: (r["created"], r["namespace"], r["name"]), reverse=True)


def test_api_server_away_then_back(populated, portal) -> None:
    cluster = populated.cluster
    portal.wait("/api/portal/runs", ready)
    from tau_testing.sim.server import ServerThread

    cluster._server.stop()  # the API server goes away (its port stays reserved for the restart)
    r = portal.wait("/api/portal/runs", lambda r: r.status_code == 503, timeout=30)
    body = r.json()
    assert body["state"] == "unavailable" and "runs" not in body and body["cache"]["fresh"] is False
    page = portal.get("/portal/runs")
    assert page.status_code == 503 and "cannot be reached" in page.text and "runs-1" not in page.text
    cluster._server = ServerThread(cluster)
    cluster._server.start()  # ... and comes back on the same address
    cluster.store.create(_new_job())
    back = portal.wait("/api/portal/runs", lambda r: ready(r) and "after-outage" in r.text, timeout=30).json()
    assert back["cache"]["fresh"] is True


def _new_job() -> dict:
    from tau_core import keys

    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": "after-outage", "namespace": "aurora",
                         "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
            "spec": {"suspend": True, "template": {"spec": {"restartPolicy": "Never", "containers": [
                {"name": "m", "image": "i"}]}}}}


def test_a_failing_board_answers_502_and_others_keep_working(populated, portal, monkeypatch) -> None:
    from taugrid_portal.portal import boards

    portal.wait("/api/portal/nodes", ready)

    def broken(cache, scope):
        raise KeyError("status")

    monkeypatch.setattr(boards, "nodes_board", broken)
    populated.cluster.store.create(_new_job())  # a new cache generation: the board is computed again
    r = portal.wait("/api/portal/nodes", lambda r: r.status_code == 502)
    assert r.json() == {"error": "nodes board failed; see the Portal log"}
    assert portal.get("/api/portal/runs").status_code == 200


def test_empty_board_is_200_no_data_and_responses_are_gzipped(taugrid_cluster, portal) -> None:
    r = portal.wait("/api/portal/runs", ready)
    assert r.json()["state"] == "no_data" and r.json()["runs"] == []
    assert r.headers["content-encoding"] == "gzip"
    plain = portal.get("/api/portal/runs", headers={"Accept-Encoding": "identity"})
    assert "content-encoding" not in plain.headers

    def board(doc: dict) -> dict:  # the cache's generation may move between the two requests
        return {k: v for k, v in doc.items() if k != "cache"}

    assert board(plain.json()) == board(r.json())


def test_mounted_stellar_route_policy(taugrid_cluster, portal_factory, tmp_path) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import init_experiment, record_run

    root = tmp_path / "store"
    s, _ = ExperimentStore.init(root, project="demo")
    with s:
        init_experiment(s, "exp", project="demo")
        record_run(s, "run-1", experiment="exp", metrics={"loss": 0.5}, step=1)
    portal = portal_factory(taugrid_cluster.cluster, store=root)
    ok = portal.get("/api/stellar/snapshot", params={"target": "exp"})
    assert ok.status_code == 200 and ok.json()["target"] == "exp"
    assert ok.headers["x-frame-options"] == "SAMEORIGIN"
    assert "frame-ancestors 'self'" in ok.headers["content-security-policy"]
    # the share link of developer-guide--share-research.md: target, project and workspace
    page = portal.get("/stellar", params={"target": "run-1", "project": "demo", "workspace": "default"})
    assert page.status_code == 200 and "text/html" in page.headers["content-type"] and "run-1" in page.text
    denied = {"/api/stellar/status": "GET", "/api/v2/stellar/experiments": "POST", "/api/stellar/artifact": "GET",
              "/api/stellar/artifact/bundle/x": "GET", "/api/v1/stellar/anything": "GET", "/stellar/assets/app.js": "GET",
              "/api/stellar/snapshot": "DELETE"}
    for path, method in denied.items():
        r = portal.client.request(method, path, params={"target": "run-1"})
        assert r.status_code == 403, (method, path, r.status_code)
        assert r.json() == {"error": "this Stellar route is not available in Portal"}
    other = portal.get("/api/stellar/snapshot", params={"target": "exp", "workspace": "elsewhere"})
    assert other.status_code in (400, 403) and "workspace" in other.json()["error"]


def test_mounted_stellar_artifact_reads_need_an_exact_run_target(taugrid_cluster, portal_factory, tmp_path) -> None:
    from taugrid_portal.store import ExperimentStore
    from taugrid_portal.store.writes import init_experiment, parse_artifact, record_run

    root = tmp_path / "store"
    s, _ = ExperimentStore.init(root, project="demo")
    (root / "artifacts" / "run-1").mkdir(parents=True)
    report = root / "artifacts" / "run-1" / "report.html"
    report.write_text("<html><script>alert(1)</script>report</html>")
    outside = tmp_path / "secret.txt"
    outside.write_text("not in the store")
    (root / "artifacts" / "run-2").mkdir(parents=True)
    other = root / "artifacts" / "run-2" / "plot.txt"
    other.write_text("run 2")
    with s:
        init_experiment(s, "exp", project="demo")
        mine = parse_artifact(str(report), "run-1")
        leak = parse_artifact(str(outside), "run-1")
        theirs = parse_artifact(str(other), "run-2")
        record_run(s, "run-1", experiment="exp", group="grp", metrics={"loss": 0.5}, step=1, artifacts=[mine, leak])
        record_run(s, "run-2", experiment="exp", group="grp", metrics={"loss": 0.4}, step=1, artifacts=[theirs])
    portal = portal_factory(taugrid_cluster.cluster, store=root)
    index = portal.get("/api/stellar/artifacts", params={"target": "run-1"})
    assert index.status_code == 200 and index.json()["run"] == "run-1" and index.json()["count"] == 2
    fetch = next(a["fetch_url"] for a in index.json()["artifacts"] if a["artifact_id"] == mine["artifact_id"])
    content = portal.get(fetch)
    assert content.status_code == 200 and "report" in content.text
    assert content.headers["content-security-policy"].startswith("sandbox;")
    assert "script-src 'none'" in content.headers["content-security-policy"]
    assert content.headers["x-frame-options"] == "SAMEORIGIN" and content.headers["x-content-type-options"] == "nosniff"
    escaped = portal.get("/api/stellar/artifact", params={"target": "run-1", "artifact": leak["artifact_id"]})
    assert escaped.status_code == 400 and "escapes" in escaped.json()["detail"] and str(tmp_path) not in escaped.text
    denied = [
        {"target": "exp"},  # an experiment
        {"target": "grp"},  # a run group
        {"target": "exp", "artifact": mine["artifact_id"]},
        {"target": "grp", "artifact": mine["artifact_id"]},
        {"target": "run-1", "artifact": theirs["artifact_id"]},  # a foreign artifact id
        {"target": "run-1", "artifact": "artifact-nope"},
        {"target": "run-1", "artifact": [mine["artifact_id"], leak["artifact_id"]]},  # more than one
        {"target": ["run-1", "run-2"], "artifact": mine["artifact_id"]},
        {"target": "run-1", "run_id": "run-2", "artifact": mine["artifact_id"]},  # a conflicting hint
        {"target": "run-1"},  # content without an artifact
        {"artifact": mine["artifact_id"]},
    ]
    for params in denied:
        path = "/api/stellar/artifacts" if params == {"target": "exp"} or params == {"target": "grp"} \
            else "/api/stellar/artifact"
        r = portal.get(path, params=params)
        assert r.status_code == 403, (params, r.status_code, r.text)
        assert r.json() == {"error": "this Stellar route is not available in Portal"}
    listing_with_artifact = portal.get("/api/stellar/artifacts", params={"target": "run-1", "artifact": "x"})
    assert listing_with_artifact.status_code == 403
    assert portal.client.request("DELETE", fetch).status_code == 403


def test_queue_positions_follow_kueue_order_across_a_cluster_queue(taugrid_cluster, portal_factory, make_job) -> None:
    """Positions come from the watch cache (no visibility API): priority, then queueing time, across every
    LocalQueue of the ClusterQueue; a deactivated workload holds no place."""
    from tau_core import keys
    from tau_testing.sim.scenarios.taugrid import CLUSTER_QUEUE, WORKSPACE
    from taugrid_portal.portal.config import OperatorScope

    cluster = taugrid_cluster.cluster
    cluster.store.create({"apiVersion": "v1", "kind": "Namespace",
                          "metadata": {"name": "borealis", "labels": {keys.WORKSPACE: WORKSPACE}}})
    cluster.store.create({"apiVersion": "kueue.x-k8s.io/v1beta2", "kind": "LocalQueue",
                          "metadata": {"name": "q2", "namespace": "borealis"}, "spec": {"clusterQueue": CLUSTER_QUEUE}})
    for name, ns, queue, prio in (("a-first", "aurora", "jobqueue", None), ("b-second", "borealis", "q2", None),
                                  ("c-urgent", "aurora", "jobqueue", "taugrid-priority"),
                                  ("d-parked", "aurora", "jobqueue", None)):
        labels = {keys.KUEUE_QUEUE_NAME: queue, **({"kueue.x-k8s.io/priority-class": prio} if prio else {})}
        cluster.store.create(make_job(name, gpus=64, labels=labels, namespace=ns))  # beyond quota: all wait
        cluster.settle()
        cluster.advance(2)
    parked = next(w for w in cluster.store.list("kueue.x-k8s.io/v1beta2", "Workload", "aurora")
                  if w["metadata"]["name"].startswith("job-d-parked"))
    parked["spec"]["active"] = False
    cluster.store.update(parked)
    cluster.settle()
    portal = portal_factory(cluster, jobs_scope_mode="operator",
                            operator_scopes=(OperatorScope("vision", "aurora", "jobqueue"),
                                             OperatorScope("nlp", "borealis", "q2")))
    doc = portal.wait("/api/portal/jobs", lambda r: r.status_code == 200 and len(r.json()["workloads"]) == 4).json()
    assert doc["positionSource"] == "watch-cache"
    by = {w["name"].split("-", 1)[1].rsplit("-", 1)[0]: w for w in doc["workloads"]}
    assert {k: (w["positionInClusterQueue"], w["positionInLocalQueue"]) for k, w in by.items()} == {
        "c-urgent": (0, 0), "a-first": (1, 1), "b-second": (2, 0), "d-parked": (None, None)}, by
    assert by["c-urgent"]["priority"] == 1000 and by["b-second"]["team"] == "nlp"
    assert by["d-parked"]["active"] is False
    assert all(by[k]["pendingReason"] for k in ("a-first", "b-second", "c-urgent"))
    assert [w["name"] for w in doc["workloads"]][:3] == [by[k]["name"] for k in ("c-urgent", "a-first", "b-second")]
    nlp = portal.get("/api/portal/jobs", params={"team": "nlp"}).json()
    assert [w["positionInClusterQueue"] for w in nlp["workloads"]] == [2]
    page = portal.get("/portal/jobs")
    assert page.status_code == 200 and "CQ #" in page.text


def test_enabled_run_history_is_reported_unavailable_not_silently_live(taugrid_cluster, portal_factory) -> None:
    from taugrid_portal.portal.kusto_flags import KustoConfig, RunHistoryConfig

    portal = portal_factory(taugrid_cluster.cluster, kusto=KustoConfig(query_command="kq"),
                            run_history=RunHistoryConfig(enabled=True))
    doc = portal.wait("/api/portal/runs", ready).json()
    assert doc["historyState"] == "history-unavailable" and "live runs only" in doc["historyDiagnostic"]
