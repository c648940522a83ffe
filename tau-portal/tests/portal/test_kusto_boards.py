"""The Kusto-backed boards over real HTTP: Cluster Health (``GpuHealth()``), Node utilisation (``NodeHealth()``),
Cost (``CostTracking.GpuCostHourly``) and the durable RayJob timeline (``TauExpRunLifecycle``), read from the
loopback Kusto endpoint through the ``kusto`` fleet and history sources (tau-kusto, real azure-kusto-data), with
the degradation contract and hostile filter values."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from tau_core import keys
from tau_core.fleet import GPU_COST_COLUMNS, GPU_HEALTH_COLUMNS, NODE_HEALTH_COLUMNS
from tau_core.history import LifecycleRow, lifecycle_json
from tau_core.hookspecs import hookimpl
from tau_core.kql import create_merge, schema_commands
from tau_core.plugins import Host, set_host
from tau_testing.kusto import LoopbackKusto, StaticToken, start_kusto
from tau_testing.sim.scenarios.taugrid import NAMESPACE, QUEUE, TauGridScenario
from taugrid_portal.portal.kusto_flags import KustoConfig, RunHistoryConfig

NOW = datetime.now(UTC).replace(microsecond=0)
GIB = 2**30
TITLES = (("cluster", "cluster"), ("nodeutil", "node utilization"), ("cost", "cost"))


class LoopbackCredential:
    """The real Kusto sources, handed the loopback endpoint's test token (it stands in for an Entra sign-in)."""

    @hookimpl
    def tau_register_history_sources(self, register: Any) -> None:
        from tau_kusto.history import KustoHistory

        register("kusto", lambda **options: KustoHistory(credential=StaticToken(), **options), priority=1)

    @hookimpl
    def tau_register_fleet_sources(self, register: Any) -> None:
        from tau_kusto.fleet import KustoFleet

        register("kusto", lambda **options: KustoFleet(credential=StaticToken(), **options), priority=1)


def _platform(fake: LoopbackKusto) -> None:
    """What adx-mon and the chargeback job own on a real cluster: the sample tables and the two functions."""
    client = fake.client()
    for table, columns in (("GpuSamples", GPU_HEALTH_COLUMNS), ("NodeSamples", NODE_HEALTH_COLUMNS),
                           ("GpuCostHourly", GPU_COST_COLUMNS)):
        client.execute_mgmt("Metrics", create_merge(table, columns))
    client.execute_mgmt("Metrics", ".create-or-alter function with (folder = 'adx-mon') GpuHealth() {\nGpuSamples\n}")
    client.execute_mgmt("Metrics", ".create-or-alter function with (folder = 'adx-mon') NodeHealth() {\nNodeSamples\n}")
    for command in schema_commands("lifecycle"):
        client.execute_mgmt("Metrics", command)


def _gpu(instance: str, gpu: str, metric: str, value: float | None, *, ago: int = 60, cluster: str = "aks-1",
         pod: str = "train-0") -> dict[str, Any]:
    return {"Timestamp": NOW - timedelta(seconds=ago), "Cluster": cluster, "instance": instance, "gpu": gpu,
            "modelName": "NVIDIA A100", "namespace": NAMESPACE, "pod": pod, "metric": metric, "Value": value}


def _fill(fake: LoopbackKusto) -> None:
    gpus = [_gpu("node-1", "0", "gpu_utilization", 85), _gpu("node-1", "0", "gpu_utilization", 40, ago=300),
            _gpu("node-1", "0", "gpu_temperature_celsius", 61), _gpu("node-1", "0", "uncorrectable_remapped_rows", 0),
            _gpu("node-1", "1", "gpu_utilization", 3), _gpu("node-1", "1", "uncorrectable_remapped_rows", 2),
            _gpu("node-9", "0", "gpu_utilization", 50, cluster="aks-2"),
            _gpu("node-old", "0", "gpu_utilization", 50, ago=7200)]
    gpus += [_gpu("node-1", "1", "gpu_utilization", 4, ago=60 + i) for i in range(12)]  # an idle GPU
    gpus += [_gpu("node-1", "0", "gpu_utilization", 90, ago=60 + i) for i in range(12)]
    fake.store.ingest("GpuSamples", gpus, mapping=None, extent="gpu")
    nodes = [{"Timestamp": NOW - timedelta(seconds=ago), "Cluster": "aks-1", "instance": "node-1", "cpu": cpu,
              "metric": "node_cpu_idle_seconds", "Value": value}
             for cpu, ago, value in (("0", 180, 900.0), ("0", 120, 100.0), ("0", 60, 130.0),  # a counter reset
                                     ("1", 120, 100.0), ("1", 60, 160.0))]
    nodes += [{"Timestamp": NOW - timedelta(seconds=30), "Cluster": "aks-1", "instance": instance, "cpu": "",
               "metric": metric, "Value": value}
              for instance, metric, value in (("node-1", "node_memory_MemTotal_bytes", 64 * GIB),
                                              ("node-1", "node_memory_MemAvailable_bytes", 16 * GIB),
                                              ("node-2", "node_memory_MemTotal_bytes", 32 * GIB))]
    fake.store.ingest("NodeSamples", nodes, mapping=None, extent="node")
    cost = [{"Timestamp": NOW - timedelta(hours=h), "Cluster": "aks-1", "workspace": "vision", "namespace": NAMESPACE,
             "gpu_count": 2.0, "hourly_cost": 6.0, "peak_gpu_count": 4.0, "schema_version": 4} for h in (1, 2, 3)]
    cost += [{"Timestamp": NOW - timedelta(hours=1), "Cluster": "aks-1", "workspace": "", "namespace": "batch",
              "gpu_count": 1.5, "hourly_cost": None, "peak_gpu_count": 2.0, "schema_version": 4},
             {"Timestamp": NOW - timedelta(hours=1), "Cluster": "aks-1", "workspace": "old", "namespace": "old",
              "gpu_count": 99.0, "hourly_cost": 99.0, "peak_gpu_count": 9.0, "schema_version": 3}]
    fake.store.ingest("GpuCostHourly", cost, mapping=None, extent="cost")


def ray_rows(uid: str, name: str = "ray-hist", cluster: str = "aks-1") -> list[LifecycleRow]:
    states = [("submitted", 0, "initial-observation"), ("queued", 0, ""), ("admitted", 1, "Admitted"),
              ("running", 2, ""), ("running", 5, ""), ("succeeded", 9, "Completed")]
    return [LifecycleRow(observed_at=NOW - timedelta(minutes=30 - minute), observation_id=f"{uid}-{state}-{minute}",
                         run_id=name, durable_id=f"{cluster}/{NAMESPACE}/{uid}", namespace=NAMESPACE, cluster=cluster,
                         owning_resource_kind="RayJob", owning_resource_name=name, resource_uid=uid,
                         local_queue="jobqueue", state=state, reason=reason, image="rayproject/ray:2.9",
                         tau_command="tau run ray-hist") for state, minute, reason in states]


@pytest.fixture(scope="module")
def kusto(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackKusto]:
    fake = start_kusto(tmp_path_factory.mktemp("kusto"), queued=False)
    _platform(fake)
    _fill(fake)
    rows = ray_rows("rj-uid-1") + ray_rows("rj-uid-1", cluster="aks-2")[:2]
    fake.store.ingest("TauExpRunLifecycle", [lifecycle_json(r) for r in rows], mapping=None, extent="life")
    previous = set_host(Host.create(extra_plugins=[("loopback-credential", LoopbackCredential())]))
    yield fake
    set_host(previous)
    fake.stop()


def synced(portal: Any) -> Any:
    """``portal`` once its watch cache holds every kind the pages here read (503 until then)."""
    portal.wait("/api/portal/overview", lambda r: r.status_code == 200)
    return portal


@pytest.fixture
def boards(taugrid_cluster: TauGridScenario, portal_factory: Any, kusto: LoopbackKusto) -> Any:
    kusto.endpoint.down = False
    yield synced(portal_factory(taugrid_cluster.cluster, cluster="aks-1", kusto=KustoConfig(endpoint=kusto.query_url),
                                run_history=RunHistoryConfig(enabled=True)))
    kusto.endpoint.down = False


def test_cluster_health_board_reads_gpu_health(boards: Any) -> None:
    r = boards.get("/api/portal/cluster")
    assert r.status_code == 200, r.text
    doc = r.json()
    assert (doc["state"], doc["window"], doc["totalGPUs"], doc["errorGPUs"]) == ("ready", "15m", 2, 1)
    assert doc["models"] == [{"modelName": "NVIDIA A100", "gpus": 2}] and doc["scope"]["cluster"] == "aks-1"
    by = {(g["instance"], g["gpu"]): g for g in doc["gpus"]}
    good, bad = by[("node-1", "0")], by[("node-1", "1")]
    assert (good["utilizationPct"], good["temperatureCelsius"], good["healthy"]) == (85, 61, True)
    assert good["powerWatts"] is None  # no sample: null, never a made-up zero
    assert (bad["uncorrectableRemappedRows"], bad["healthy"], bad["pod"]) == (2, False, "train-0")
    other = boards.get("/api/portal/cluster", params={"cluster": "aks-2", "window": "1h"}).json()
    assert [g["instance"] for g in other["gpus"]] == ["node-9"] and other["window"] == "1h"
    assert [g["instance"] for g in boards.get("/api/portal/cluster", params={"window": "3h"}).json()["gpus"]] \
        == ["node-1", "node-1", "node-old"]
    empty = boards.get("/api/portal/cluster", params={"model": "NVIDIA H100"})
    assert empty.status_code == 200 and (empty.json()["state"], empty.json()["gpus"]) == ("no_data", [])


def test_node_utilisation_board_reads_node_health(boards: Any) -> None:
    doc = boards.get("/api/portal/nodeutil").json()
    assert doc["state"] == "ready" and doc["availability"] == "ready"
    by = {n["instance"]: n for n in doc["nodes"]}
    assert (by["node-1"]["cpuUtilPct"], by["node-1"]["cpuCores"], by["node-1"]["memUsedPct"]) == (25.0, 2, 75.0)
    assert (by["node-2"]["cpuUtilPct"], by["node-2"]["memUsedPct"], by["node-2"]["memTotalBytes"]) == (
        None, None, 32 * GIB)
    assert [n["instance"] for n in doc["nodes"]] == ["node-1", "node-2"]  # known CPU first
    assert boards.get("/api/portal/nodeutil", params={"instance": "node-2"}).json()["nodes"][0]["instance"] == "node-2"


def test_cost_board_reads_cost_tracking(boards: Any) -> None:
    doc = boards.get("/api/portal/cost").json()
    assert doc["state"] == "ready" and doc["window"] == "7d"
    assert (doc["totalGPUHours"], doc["totalEstimatedCostUSD"]) == (7.5, 18.0)
    assert (doc["costAvailable"], doc["gpuHoursAvailable"], doc["idleAvailable"]) == (True, True, True)
    by = {w["namespace"]: w for w in doc["workspaces"]}
    assert set(by) == {NAMESPACE, "batch"}  # schema-v3 rows are not trusted
    assert (by[NAMESPACE]["workspace"], by[NAMESPACE]["gpuHours"], by[NAMESPACE]["estimatedCostUSD"],
            by[NAMESPACE]["peakGPUs"]) == ("vision", 6.0, 18.0, 4.0)
    assert by[NAMESPACE]["avgUtilPct"] is not None
    assert (by["batch"]["workspace"], by["batch"]["estimatedCostUSD"], by["batch"]["costAvailable"]) == (
        "batch", None, False)
    assert [(g["instance"], g["gpu"]) for g in doc["idleGPUs"]] == [("node-1", "1")]
    mine = boards.get("/api/portal/cost", params={"namespace": "batch", "idle-threshold": "95"}).json()
    assert [w["namespace"] for w in mine["workspaces"]] == ["batch"] and mine["totalEstimatedCostUSD"] is None
    assert boards.get("/api/portal/cost", params={"idle-threshold": "0"}).status_code == 400


def test_overview_cards_come_from_the_kusto_boards(boards: Any) -> None:
    cards = boards.wait("/api/portal/overview", lambda r: r.status_code == 200).json()["cards"]
    assert (cards["health"], cards["healthUnavailable"]) == ({"totalGPUs": 2, "errorGPUs": 1}, "")
    assert (cards["cost"], cards["costUnavailable"]) == ({"window": "7d", "totalGPUHours": 7.5, "idleGPUs": 1}, "")


def test_ray_history_timeline(boards: Any) -> None:
    r = boards.get("/api/portal/ray/history/rj-uid-1")
    assert r.status_code == 200, r.text
    events = r.json()["events"]
    assert [e["state"] for e in events] == ["submitted", "queued", "admitted", "running", "succeeded"]
    last = events[-1]
    assert (last["reason"], last["name"], last["kind"], last["cluster"], last["queue"], last["command"]) == (
        "Completed", "ray-hist", "RayJob", "aks-1", "jobqueue", "tau run ray-hist")
    assert last["observedAt"].endswith("Z") and last["durableId"] == f"aks-1/{NAMESPACE}/rj-uid-1"
    assert boards.get("/api/portal/ray/history/no-such-uid").json() == {"error": "durable RayJob history not found"}


def test_run_page_of_a_gone_rayjob_reads_the_recorded_history(boards: Any, kusto: LoopbackKusto,
                                                                 taugrid_cluster: TauGridScenario,
                                                                 portal_factory: Any) -> None:
    page = boards.get(f"/portal/runs/{NAMESPACE}/ray-hist")  # no such RayJob in the cluster any more
    assert page.status_code == 200, page.text
    assert "Its Kubernetes objects are gone" in page.text and f"aks-1/{NAMESPACE}/rj-uid-1" in page.text
    states = re.findall(r'<td data-key="state">([^<]*)<', page.text)
    assert states == ["submitted", "queued", "admitted", "running", "succeeded"]
    assert "data-live-detail" not in page.text and 'id="pods-table"' not in page.text
    hostile = 'ray-hist" or run_id != "'
    r = boards.get(f"/portal/runs/{NAMESPACE}/" + hostile.replace('"', "%22").replace(" ", "%20"))
    assert r.status_code == 404 and "Its Kubernetes objects are gone" not in r.text
    assert any('run_id == "ray-hist\\" or run_id != \\""' in q for q in kusto.endpoint.queries)
    assert boards.get(f"/portal/runs/{NAMESPACE}/never-ran").status_code == 404
    detail = boards.get(f"/api/portal/runs/{NAMESPACE}/ray-hist").json()  # the API's durable tier
    assert detail["durable"] is True and detail["run"]["status"] == "Complete"
    assert [e["state"] for e in detail["history"]["events"]][-1] == "succeeded"
    assert detail["diagnostics"]["history"] == "ready" and detail["diagnostics"]["pods"] == "not_configured"
    assert boards.get(f"/api/portal/runs/{NAMESPACE}/never-ran").status_code == 404
    assert synced(portal_factory(taugrid_cluster.cluster)).get(f"/portal/runs/{NAMESPACE}/ray-hist").status_code \
        == 404
    kusto.endpoint.down = True
    r = boards.get(f"/portal/runs/{NAMESPACE}/ray-hist")
    assert r.status_code == 502 and "durable run history query failed" in r.text


def test_ray_board_lists_recorded_rayjobs(boards: Any, taugrid_cluster: TauGridScenario,
                                          portal_factory: Any) -> None:
    doc = boards.get("/api/portal/ray").json()
    assert doc["historyState"] == "available" and doc["state"] == "ready"
    recorded = [r for r in doc["history"] if r["name"] != "ray-live"]  # (the browser test's RayJob, if it ran)
    assert [(r["name"], r["status"], r["source"], r["historyPath"]) for r in recorded] == [
        ("ray-hist", "Complete", "durable", "/api/portal/ray/history/rj-uid-1")]
    assert boards.get(doc["history"][0]["historyPath"]).status_code == 200
    page = boards.get("/portal/ray")
    assert f'href="/portal/runs/{NAMESPACE}/ray-hist"' in page.text and 'data-state="available"' in page.text
    live_only = synced(portal_factory(taugrid_cluster.cluster)).get("/api/portal/ray").json()
    assert (live_only["historyState"], live_only["history"]) == ("live-only", [])


def test_hostile_filters_are_quoted(boards: Any, kusto: LoopbackKusto) -> None:
    hostile = 'rj-uid-1" or resource_uid != "'
    r = boards.get("/api/portal/ray/history/" + hostile.replace('"', "%22").replace(" ", "%20"))
    assert r.status_code == 404 and r.json()["error"] == "durable RayJob history not found"
    assert any('resource_uid == "rj-uid-1\\" or resource_uid != \\""' in q for q in kusto.endpoint.queries)
    for board, param in (("cluster", "instance"), ("nodeutil", "instance"), ("cluster", "model"),
                         ("cost", "namespace")):
        r = boards.get(f"/api/portal/{board}", params={param: 'node-1" or Cluster != "x" //'})
        assert r.status_code == 200 and r.json()["state"] == "no_data", (board, r.text)
    runs = boards.get("/api/portal/runs", params={"namespace": f'{NAMESPACE}" or namespace != "'})
    assert runs.status_code == 200 and runs.json()["runs"] == [] and runs.json()["historyState"] == "available"


def test_degradation_contract(boards: Any, kusto: LoopbackKusto, taugrid_cluster: TauGridScenario,
                              portal_factory: Any) -> None:
    kusto.endpoint.down = True  # Kusto unreachable: 502, the details only in the Portal's log
    for board, title in TITLES:
        r = boards.get(f"/api/portal/{board}", params={"window": "2h"})
        assert r.status_code == 502 and r.json() == {"error": f"{title} board failed; see the Portal log"}, r.text
    r = boards.get("/api/portal/ray/history/rj-uid-1")
    assert r.status_code == 502 and r.json() == {"error": "durable RayJob history query failed"}
    kusto.endpoint.down = False
    bare = portal_factory(taugrid_cluster.cluster)  # no Kusto at all: 503 with the reason
    for board, title in TITLES:
        r = bare.get(f"/api/portal/{board}")
        assert r.status_code == 503 and r.json() == {
            "reason": f"{title} board unavailable: portal started without a Kusto query command",
            "state": "unavailable"}
    r = bare.get("/api/portal/ray/history/rj-uid-1")
    assert r.status_code == 503 and r.json()["reason"] == "durable RayJob history is not configured"
    adapter = portal_factory(taugrid_cluster.cluster, kusto=KustoConfig(query_command="kusto-cli"))
    assert "--kusto-endpoint" in adapter.get("/api/portal/cluster").json()["reason"]
    assert bare.get("/portal/cluster").status_code == 503


CHROMIUM = os.environ.get("TAU_CHROMIUM", "/usr/bin/chromium")
ARTIFACTS = Path(__file__).resolve().parents[3] / "test-artifacts" / "portal"


@pytest.fixture
def page() -> Iterator[Any]:
    """The Debian headless Chromium (never a downloaded browser); console errors and 4xx/5xx are collected."""
    if not os.access(CHROMIUM, os.X_OK):
        pytest.fail(f"headless Chromium is required but {CHROMIUM} is missing; run tests/tools/ensure-chromium.sh",
                    pytrace=False)
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, headless=True,
                                     args=["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run"])
        p: Any = browser.new_context(viewport={"width": 1400, "height": 1000}).new_page()
        p.errors = []
        p.on("console", lambda m: p.errors.append(m.text) if m.type == "error" else None)
        p.on("pageerror", lambda e: p.errors.append(str(e)))
        p.on("response", lambda r: p.errors.append(f"{r.status} {r.url}") if r.status >= 400 else None)
        try:
            yield p
        finally:
            browser.close()


@pytest.mark.browser
def test_boards_render_rows_and_degraded_state_in_chromium(boards: Any, kusto: LoopbackKusto, page: Any,
                                                         taugrid_cluster: TauGridScenario,
                                                         portal_factory: Any) -> None:
    rayjob = taugrid_cluster.cluster.store.create({
        "apiVersion": "ray.io/v1", "kind": "RayJob",
        "metadata": {"name": "ray-live", "namespace": NAMESPACE,
                     "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE, keys.KUEUE_QUEUE_NAME: QUEUE}},
        "spec": {"entrypoint": "python train.py", "suspend": True, "rayClusterSpec": {
            "headGroupSpec": {"rayStartParams": {}, "template": {"spec": {"containers": [
                {"name": "head", "image": "rayproject/ray:2.9", "resources": {"requests": {"cpu": "1"}}}]}}},
            "workerGroupSpecs": []}}})
    uid = rayjob["metadata"]["uid"]
    kusto.store.ingest("TauExpRunLifecycle", [lifecycle_json(r) for r in ray_rows(uid, name="ray-live")],
                       mapping=None, extent="live")

    page.goto(boards.url + "/portal/cluster")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#gpu-health-table tbody tr").count() == 2
    assert page.locator("#gpu-health-table tbody tr[data-status=error] td[data-key=gpu]").inner_text() == "1"
    assert "2 GPUs · 1 with errors" in page.locator("#gpu-summary").inner_text()
    assert page.locator("#nodeutil-table tbody tr").first.locator("td[data-key=cpu]").inner_text() == "25.0"
    page.screenshot(path=str(_artifact("kusto-cluster")), full_page=True)
    page.goto(boards.url + "/portal/cost")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#cost-table tbody tr").count() == 2
    assert page.locator("#idle-table tbody tr td[data-key=instance]").all_inner_texts() == ["node-1"]
    page.goto(boards.url + f"/portal/runs/{NAMESPACE}/ray-live")
    page.wait_for_selector("#ray-history-table tbody tr")
    assert page.locator("#ray-history-state").get_attribute("data-state") == "ready"
    assert page.locator("#ray-history-table tbody td[data-key=state]").all_inner_texts() == [
        "submitted", "queued", "admitted", "running", "succeeded"]
    page.screenshot(path=str(_artifact("kusto-ray-history")), full_page=True)
    page.goto(boards.url + f"/portal/runs/{NAMESPACE}/ray-hist")  # deleted: the page comes from Kusto alone
    page.wait_for_selector("#durable-note")
    assert page.locator("#run-status").inner_text() == "Complete"
    assert page.locator("#ray-history-table tbody tr").count() == 5 and page.locator("#phases").count() == 0
    assert page.errors == []

    kusto.endpoint.down = True  # Kusto unreachable: the page says so instead of showing nothing as if it were fine
    page.goto(boards.url + "/portal/cluster?window=2h")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#banner").inner_text() == "cluster board failed; see the Portal log"
    page.goto(boards.url + f"/portal/runs/{NAMESPACE}/ray-live?refresh=0")
    page.wait_for_selector("#ray-history-state")
    assert page.locator("#ray-history-state").get_attribute("data-state") == "unavailable"
    assert page.locator("#pods-table").count() == 1  # the rest of the run page stays
    kusto.endpoint.down = False
    bare = portal_factory(taugrid_cluster.cluster)
    page.goto(bare.url + "/portal/cost")
    page.wait_for_selector("body[data-ready=true]")
    assert page.locator("#banner").inner_text() == "cost board unavailable: portal started without a Kusto query command"
    assert page.locator("#cost-table").count() == 0
    page.screenshot(path=str(_artifact("kusto-cost-unavailable")), full_page=True)


def _artifact(name: str) -> Path:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    return ARTIFACTS / f"{name}.png"
