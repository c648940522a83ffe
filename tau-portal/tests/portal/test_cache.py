"""The watch cache: requests come from watches, not lists per request; dropped watches resume; 410 relists."""

from __future__ import annotations


def _names(portal) -> set[str]:
    return {r["name"] for r in portal.get("/api/portal/runs").json().get("runs", [])}


def _watching(portal, log) -> bool:
    """Every informer has listed and its watch is open on the server (the baseline for counting)."""
    informers = portal.app.app.state.portal.cache.informers.values()
    if not all(i.absent or (i.synced and i.watches >= 1) for i in informers):
        return False
    return log.count(verb="watch") >= sum(1 for i in informers if not i.absent)


def test_portal_requests_cost_no_kubernetes_reads(taugrid_cluster, portal, make_job) -> None:
    log = taugrid_cluster.cluster.requests
    portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and _watching(portal, log))
    before = (log.count(verb="list"), log.count(verb="get"), log.total)
    for _ in range(25):
        for path in ("/api/portal/runs", "/api/portal/nodes", "/api/portal/overview", "/api/portal/jobs",
                     "/portal/runs"):
            assert portal.get(path).status_code == 200, path
    taugrid_cluster.cluster.store.create(make_job("late"))
    portal.wait("/api/portal/runs", lambda r: "late" in r.text)
    assert (log.count(verb="list"), log.count(verb="get")) == before[:2]
    assert log.total == before[2]  # not one request: the open watches carried the new Job


def test_a_dropped_watch_resumes_and_a_410_relists(taugrid_cluster, portal_factory, make_job) -> None:
    cluster = taugrid_cluster.cluster
    cluster.faults.drop_watches(after_events=1, path_regex=r"/jobs\?.*watch=true", count=1, reset=True)
    cluster.faults.add(method="GET", path_regex=r"/rayjobs\?.*watch=true", status=410, count=1,
                       message="too old resource version")
    portal = portal_factory(cluster)
    portal.wait("/api/portal/runs", lambda r: r.status_code == 200)
    cluster.store.create(make_job("first"))
    cluster.store.create(make_job("second"))
    cluster.store.create(make_job("third"))
    doc = portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and
                      {"first", "second", "third"} <= {x["name"] for x in r.json()["runs"]}).json()
    assert doc["cache"]["fresh"] is True
    informers = portal.app.app.state.portal.cache.informers
    assert informers["jobs"].watches >= 2 and informers["jobs"].lists == 1  # resumed from its version
    assert informers["rayjobs"].lists >= 2  # 410: the version was too old, so it listed again


def test_a_hung_watch_is_abandoned_and_the_data_reread(taugrid_cluster, portal_factory, make_job) -> None:
    cluster = taugrid_cluster.cluster
    # the first Jobs watch hangs: the server does not answer it for a minute (a silently lost connection)
    cluster.faults.latency(60, method="GET", path_regex=r"/jobs\?.*watch=true", count=1)
    portal = portal_factory(cluster, cache_options={"watch_timeout": 1, "silence_grace": 2})
    portal.wait("/api/portal/runs", lambda r: r.status_code == 200)
    cluster.store.create(make_job("after-hang"))
    portal.wait("/api/portal/runs", lambda r: r.status_code == 200 and "after-hang" in r.text, timeout=20)
    jobs = portal.app.app.state.portal.cache.informers["jobs"]
    assert jobs.watches >= 2 and jobs.lists >= 2  # timed out, disconnected, listed again
