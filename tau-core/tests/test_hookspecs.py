"""Every hook is exercised through the plugin manager (datasette-style hygiene).

Hooks without a production implementation yet are exercised here by test plugins, so the
contract in each docstring is checked the way a third-party plugin would use it.
"""

from __future__ import annotations

import inspect
import sys
from pathlib import Path

import click

from tau_core import hookspecs
from tau_core.hookspecs import hookimpl
from tau_core.plugins import FAMILIES, RENDER_KINDS, RESOLVER_KINDS, Host

REPO = Path(__file__).resolve().parents[2]


def _hook_names() -> list[str]:
    return sorted(n for n, f in vars(hookspecs).items() if n.startswith("tau_") and callable(f))


def _host(*plugins: object) -> Host:
    return Host.create(entry_points=False, extra_plugins=[(f"p{i}", p) for i, p in enumerate(plugins)], env={},
                       builtins=False)


def test_every_hook_has_a_test():
    this = sys.modules[__name__]
    missing = [name for name in _hook_names() if not hasattr(this, f"test_hook_{name}")]
    assert not missing, f"hooks without a test_hook_<name> test: {missing}"


def test_every_hook_belongs_to_a_family():
    assert sorted(FAMILIES.values()) == _hook_names()


def test_every_hook_is_documented_with_its_signature():
    doc = (REPO / "docs" / "plugins.md").read_text()
    for name in _hook_names():
        params = ", ".join(inspect.signature(getattr(hookspecs, name)).parameters)
        signature = f"{name}({params})"
        assert f"`{signature}`" in doc, f"docs/plugins.md does not document `{signature}`"


def test_every_hook_has_a_docstring():
    for name in _hook_names():
        assert len((getattr(hookspecs, name).__doc__ or "").strip()) > 80, name


def test_hook_tau_register_roots(tau_cli, tau_plugins):
    @click.command()
    @click.argument("who")
    def greet(who: str) -> None:
        click.echo(f"hello {who}")

    class P:
        @hookimpl
        def tau_register_roots(self, register):
            register("greet", greet, help="Greet someone.")

    tau_plugins.register(P(), name="greeter")
    help_ = tau_cli("--help")
    assert "greet" in help_.stdout and "Greet someone." in help_.stdout
    result = tau_cli("greet", "world")
    assert (result.exit_code, result.stdout) == (0, "hello world\n")


def test_hook_tau_register_resolvers():
    class Low:
        @hookimpl
        def tau_register_resolvers(self, register):
            register("low", lambda req: f"low:{req}", kind="workspace-defaults", priority=0)
            register("never", lambda req: None, kind="workload-profile", priority=5)

    class High:
        @hookimpl
        def tau_register_resolvers(self, register):
            register("high", lambda req: None if req == "skip" else f"high:{req}", kind="workspace-defaults",
                     priority=10)

    host = _host(Low(), High())
    assert host.resolve("workspace-defaults", "x") == "high:x"
    assert host.resolve("workspace-defaults", "skip") == "low:skip"
    assert host.resolve("workload-profile", "x") is None
    assert "workspace-defaults" in RESOLVER_KINDS


def test_hook_tau_register_renderers():
    def render_job(request):
        return [{"apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": request["name"]}}]

    class P:
        @hookimpl
        def tau_register_renderers(self, register):
            register("Job", render_job)

    host = _host(P())
    renderer = host.registry("renderers")["Job"].load()
    assert renderer({"name": "train"})[0]["metadata"]["name"] == "train"
    assert "Job" in RENDER_KINDS


def test_hook_tau_register_storage_backends(tmp_path):
    class DirStore:
        def __init__(self, root):
            self.root = Path(root)

        def put(self, key, data):
            path = (self.root / key).resolve()
            assert path.is_relative_to(self.root.resolve())
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)

        def get(self, key):
            return (self.root / key).read_bytes()

    class P:
        @hookimpl
        def tau_register_storage_backends(self, register):
            register("dir", DirStore)

    store = _host(P()).registry("storage_backends")["dir"].load()(root=tmp_path)
    store.put("a/b.txt", b"data")
    assert store.get("a/b.txt") == b"data"


def test_hook_tau_register_telemetry_sinks(tmp_path):
    from datetime import UTC, datetime

    from tau_core import telemetry

    received = []

    class Sink:
        def write(self, records):
            received.extend(telemetry.to_record(r) for r in records)

        def register_run(self, run):
            received.append(("register", run.run_id, run.idempotency_key))

        def update_status(self, update):
            received.append(("status", update.run_id, update.state))

        def render_evidence(self, run_id, out):
            out.write_text(run_id)
            return out

        def close(self):
            received.append("closed")

    class P:
        @hookimpl
        def tau_register_telemetry_sinks(self, register):
            register("memory", Sink)

    sink = _host(P()).registry("telemetry_sinks")["memory"].load()()
    assert isinstance(sink, telemetry.TelemetrySink)
    sink.register_run(telemetry.RunRegistration(run_id="r1", project="p", idempotency_key="k1"))
    sink.write([{"run_id": "r1", "metric_name": "loss", "step": 1, "value": 0.5}])
    done = datetime(2026, 1, 1, tzinfo=UTC)
    sink.write([telemetry.status_record(run_id="r1", project="p", run_group_id="g", experiment_id="",
                                        state="failed", completed_at=done, source="test")])
    sink.update_status(telemetry.RunStatusUpdate(run_id="r1", state="failed", completed_at=done))
    page = sink.render_evidence("r1", tmp_path / "page.html")
    sink.close()
    loss, marker = received[1], received[2]
    assert received[0] == ("register", "r1", "k1") and received[3:] == [("status", "r1", "failed"), "closed"]
    assert (loss.run_id, loss.metric_name, loss.step, loss.value) == ("r1", "loss", 1, 0.5)
    assert marker.metric_name == telemetry.RUN_STATUS_METRIC and marker.value == -1.0
    assert telemetry.state_of_marker(marker.value) == "failed" and marker.tags["tau.status.state"] == "failed"
    assert page.read_text() == "r1"


def test_hook_tau_register_gpu_class_rules():
    class Operator:
        @hookimpl
        def tau_register_gpu_class_rules(self, register):
            register("acme-sizes", lambda v: "h100" if v.lower().startswith("acme_h100") else None, priority=10)

    class Fallback:
        @hookimpl
        def tau_register_gpu_class_rules(self, register):
            register("fallback", lambda v: "a100" if "a100" in v.lower() else None)

    rules = [e.load() for e in _host(Fallback(), Operator()).registry("gpu_class_rules").ordered()]
    classify = lambda v: next((c for c in (r(v) for r in rules) if c), None)  # noqa: E731
    assert classify("ACME_H100_x8") == "h100"
    assert classify("Standard_ND96asr_A100_v4") == "a100"
    assert classify("Standard_D4s_v5") is None


def test_hook_tau_register_gpu_class_rules_tables_are_checked_for_conflicts():
    from tau_core.gpu_catalog import find_conflicts, gpu_class_for, plugin_rules

    class Acme:
        @hookimpl
        def tau_register_gpu_class_rules(self, register):
            register("acme", [{"match": {"vmSizes": ["Acme_H100x8"]}, "labels": {"tau.azure.com/gpu-class": "h100-80gb"}},
                              {"match": {"vmSizes": ["Standard_ND96asr_v4"]},
                               "labels": {"tau.azure.com/gpu-class": "a100-80gb"}}], priority=5)

    host = Host.create(entry_points=False, extra_plugins=[("acme", Acme())], env={})
    assert gpu_class_for("acme_h100x8", host) == "h100-80gb"
    assert gpu_class_for("Standard_ND96isr_H200_v5", host) == "h200-141gb"  # the built-in table still answers
    conflicts = find_conflicts(plugin_rules(host))
    assert [(c.key, c.first.source, c.second.source) for c in conflicts] == [
        ("tau.azure.com/gpu-class", "acme", "builtin")]
    assert "Standard_ND96asr_v4" in conflicts[0].message()


def test_hook_tau_register_execution_backends():
    class Backend:
        name = "echo"

        def __init__(self, **options):
            self.options = options

    class P:
        @hookimpl
        def tau_register_execution_backends(self, register):
            register("echo", Backend)

    backend = _host(P()).registry("execution_backends")["echo"].load()(root="/tmp")
    assert backend.name == "echo" and backend.options == {"root": "/tmp"}


def test_hook_tau_register_history_sources():
    from datetime import UTC, datetime

    import attrs
    import pytest

    from tau_core.errors import ConfigError
    from tau_core.exptelemetry import LIFECYCLE_COLUMNS
    from tau_core.history import (
        HistorySource,
        LifecycleRow,
        LogLine,
        LogQuery,
        RunQuery,
        history_source,
        lifecycle_row,
        transitions,
    )

    t0 = datetime(2026, 1, 1, tzinfo=UTC)

    class Memory:
        def __init__(self, rows):
            self.rows = rows

        def run_history(self, query):
            return [lifecycle_row(r) for r in self.rows if r["run_id"] == query.run]

        def metric_points(self, flt):
            return []

        def container_logs(self, query):
            return [LogLine(t0, query.cluster, query.namespace, f"{query.run}-abc", "main", "hello")]

        def close(self):
            pass

    rows = [{"run_id": "r1", "state": "submitted", "observed_at": "2026-01-01T00:00:00Z", "generation": "2"},
            {"run_id": "r1", "state": "running", "observed_at": "2026-01-01T00:01:00Z"},
            {"run_id": "r1", "state": "running", "observed_at": "2026-01-01T00:02:00Z"},
            {"run_id": "r1", "state": "failed", "observed_at": "2026-01-01T00:03:00Z", "reason": "x"},
            {"run_id": "r1", "state": "failed", "observed_at": "2026-01-01T00:03:01Z", "reason": "BackoffLimit/OOM"},
            {"run_id": "r2", "state": "queued", "observed_at": "2026-01-01T00:00:00Z"}]

    class P:
        @hookimpl
        def tau_register_history_sources(self, register):
            register("memory", Memory)

    host = _host(P())
    source = history_source("memory", host, rows=rows)
    assert isinstance(source, HistorySource)
    got = transitions(source.run_history(RunQuery("r1")))
    assert [(r.state, r.reason) for r in got] == [("submitted", ""), ("running", ""), ("failed", "BackoffLimit/OOM")]
    assert got[0].observed_at == t0 and got[0].generation == 2 and got[-1].terminal
    assert source.container_logs(LogQuery("c1", "ns", "r1"))[0].pod == "r1-abc"
    # one definition: the typed row has exactly the lifecycle columns, in order
    assert [f.name for f in attrs.fields(LifecycleRow)] == [c.name for c in LIFECYCLE_COLUMNS]
    with pytest.raises(ConfigError, match="no run-history source named 'kusto'"):
        history_source("kusto", host)


def test_hook_tau_register_fleet_sources():
    import pytest

    from tau_core.errors import ConfigError
    from tau_core.fleet import (
        GPU_HEALTH_COLUMNS,
        FleetQuery,
        FleetSource,
        GpuCost,
        GpuSample,
        fleet_source,
        gpu_cost_query,
        gpu_health_query,
    )

    class Memory:
        def __init__(self, gpus):
            self.gpus = gpus

        def gpu_health(self, query):
            return [g for g in self.gpus if not query.cluster or g.cluster == query.cluster]

        def node_health(self, query):
            return []

        def gpu_cost(self, query):
            return [GpuCost("ws", "ns", 1.5, None, 2.0, samples=3, gpu_hours_samples=3)]

        def gpu_utilisation(self, query):
            return []

        def close(self):
            pass

    class P:
        @hookimpl
        def tau_register_fleet_sources(self, register):
            register("memory", Memory)

    host = _host(P())
    source = fleet_source("memory", host, gpus=[GpuSample("c1", "node-1", "0", "gpu_utilization", 40.0),
                                                GpuSample("c2", "node-9", "0", "gpu_utilization", 1.0)])
    assert isinstance(source, FleetSource)
    assert [g.instance for g in source.gpu_health(FleetQuery(cluster="c1"))] == ["node-1"]
    assert source.gpu_cost(FleetQuery())[0].estimated_cost_usd is None  # a missing measure stays missing
    with pytest.raises(ConfigError, match="no fleet telemetry source named 'kusto'"):
        fleet_source("kusto", host)
    # the generated queries quote every filter value and project exactly the declared columns
    hostile = 'x" | take 100000 //'
    kql = gpu_health_query(FleetQuery(window_seconds=60, cluster=hostile))
    assert '| where Cluster == "x\\" | take 100000 //"' in kql and "ago(60s)" in kql
    assert "| project " + ", ".join(c.name for c in GPU_HEALTH_COLUMNS) in kql
    assert 'namespace == "a\\"b"' in gpu_cost_query(FleetQuery(namespace='a"b'))
