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
