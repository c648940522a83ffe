"""The loopback endpoint itself, through the real azure-kusto-data / azure-kusto-ingest clients."""

from __future__ import annotations

import io

import pytest
from azure.kusto.data import KustoClient, KustoConnectionStringBuilder
from azure.kusto.data.data_format import DataFormat
from azure.kusto.data.exceptions import KustoServiceError
from azure.kusto.ingest import IngestionProperties, QueuedIngestClient

from tau_testing.kusto import LoopbackKusto, StaticToken


def _ingest(fake: LoopbackKusto, data: bytes, tag: str) -> None:
    client = QueuedIngestClient(KustoConnectionStringBuilder.with_azure_token_credential(fake.ingest_url,
                                                                                         StaticToken()))
    props = IngestionProperties("Metrics", "LoopT", data_format=DataFormat.JSON, ingestion_mapping_reference="LoopM",
                                ingest_by_tags=[tag], ingest_if_not_exists=[tag])
    client.ingest_from_stream(io.BytesIO(data), props)


def test_management_query_and_queued_ingestion(kusto_up: LoopbackKusto) -> None:
    client = kusto_up.client()
    created = client.execute_mgmt("Metrics", ".create-merge table LoopT (name:string, n:long, at:datetime, d:dynamic)")
    assert [r["ColumnName"] for r in created.primary_results[0]] == ["name", "n", "at", "d"]
    client.execute_mgmt("Metrics", '.create-or-alter table LoopT ingestion json mapping "LoopM" '
                        '\'[{"column":"name","path":"$.who","datatype":"string"},{"column":"n","path":"$.n"},'
                        '{"column":"at","path":"$.at"},{"column":"d","path":"$.d"}]\'')
    data = (b'{"who":"a","n":1,"at":"2026-01-01T00:00:00Z","d":{"k":"x"}}\n'
            b'{"who":"b","n":2,"at":"2026-01-01T00:00:01.5+00:00","d":{"k":"y"}}\n')
    _ingest(kusto_up, data, "loop-1")
    assert kusto_up.drain() == 2
    _ingest(kusto_up, data, "loop-1")  # the same ingest-by tag: skipped, as ADX does
    _ingest(kusto_up, data[:data.index(b"\n") + 1], "loop-2")
    assert kusto_up.drain() == 1
    got = kusto_up.query("LoopT | where n >= 1 and name in ('a', \"b\") | extend k = tostring(d.k) "
                         "| summarize arg_max(at, *) by name | project name, n, k, at | order by name asc | take 10")
    assert [(r["name"], r["n"], r["k"]) for r in got] == [("a", 1, "x"), ("b", 2, "y")]
    assert got[1]["at"].isoformat() == "2026-01-01T00:00:01.500000+00:00"
    assert kusto_up.query("LoopT | count") == [{"Count": 3}]
    assert kusto_up.query("LoopT | summarize count() by name | order by name asc") == [
        {"name": "a", "count_": 2}, {"name": "b", "count_": 1}]
    assert kusto_up.queue is not None and kusto_up.queue.failures == []


def test_outside_the_subset_fails_loudly(kusto_up: LoopbackKusto) -> None:
    client = kusto_up.client()
    client.execute_mgmt("Metrics", ".create-merge table LoopT (name:string, n:long, at:datetime, d:dynamic)")
    with pytest.raises(KustoServiceError, match="unsupported operator"):
        client.execute("Metrics", "LoopT | mv-expand d")
    with pytest.raises(KustoServiceError, match="could not be resolved"):
        client.execute("Metrics", "NoSuchTable | take 1")
    with pytest.raises(KustoServiceError, match="not supported"):
        client.execute_mgmt("Metrics", ".drop table LoopT")


def test_bearer_token_required_and_down_switch(kusto_up: LoopbackKusto) -> None:
    wrong = KustoClient(KustoConnectionStringBuilder.with_azure_token_credential(kusto_up.query_url,
                                                                                 StaticToken("not-the-token")))
    with pytest.raises(KustoServiceError, match="401"):
        wrong.execute("Metrics", "LoopT | count")
    kusto_up.endpoint.down = True
    with pytest.raises(KustoServiceError):
        kusto_up.client().execute("Metrics", "LoopT | count")


def test_function_calls_and_named_aggregates(kusto_up: LoopbackKusto) -> None:
    """The subset the Portal's fleet queries need: ``F()`` expands a recorded function over a table, and
    ``summarize N=agg(C), ... by K`` groups; anything beyond that still fails loudly."""
    client = kusto_up.client()
    client.execute_mgmt("Metrics", ".create-merge table LoopAgg (k:string, v:real)")
    client.execute_mgmt("Metrics", ".create-or-alter function with (folder = 'x') LoopFn() {\nLoopAgg\n"
                                   "| where v >= 0\n}")
    kusto_up.store.ingest("LoopAgg", [{"k": "a", "v": 1.0}, {"k": "a", "v": 3.0}, {"k": "b", "v": None},
                                      {"k": "b", "v": -5.0}], mapping=None, extent="agg")
    got = kusto_up.query("LoopFn() | summarize S=sum(v), A=avg(v), M=max(v), N=count(), C=countif(isnotnull(v)) "
                         "by k | order by k asc")
    assert got == [{"k": "a", "S": 4.0, "A": 2.0, "M": 3.0, "N": 2, "C": 2}]
    everything = kusto_up.query("LoopAgg | summarize N=count(), C=countif(isnotnull(v)), L=min(v) by k "
                                "| order by k asc")
    assert [(r["k"], r["N"], r["C"], r["L"]) for r in everything] == [("a", 2, 2, 1.0), ("b", 2, 1, -5.0)]
    with pytest.raises(KustoServiceError, match="unsupported aggregate"):
        client.execute("Metrics", "LoopAgg | summarize P=percentile(v, 50) by k")
    with pytest.raises(KustoServiceError, match="could not be resolved to a function"):
        client.execute("Metrics", "NoSuchFn() | take 1")


def test_history_source_quotes_a_hostile_run_name(kusto_up: LoopbackKusto) -> None:
    """A run name carrying KQL metacharacters stays one string literal: it matches nothing instead of widening
    the query to every run."""
    from datetime import UTC, datetime

    from tau_core.history import LifecycleRow, RunQuery, lifecycle_json
    from tau_core.kql import schema_commands
    from tau_kusto.history import KustoHistory

    for command in schema_commands("lifecycle"):
        kusto_up.client().execute_mgmt("Metrics", command)
    row = LifecycleRow(observed_at=datetime(2026, 1, 1, tzinfo=UTC), observation_id="o1", run_id="quoted-run",
                       durable_id="c/ns/u1", namespace="ns", cluster="c", owning_resource_kind="RayJob",
                       resource_uid="u1", state="running")
    kusto_up.store.ingest("TauExpRunLifecycle", [lifecycle_json(row)], mapping=None, extent="hostile")
    source = KustoHistory(kusto_up.query_url, credential=StaticToken())
    try:
        assert [r.state for r in source.run_history(RunQuery("quoted-run", kind="RayJob", resource_uid="u1"))] \
            == ["running"]
        for hostile in ('quoted-run" or run_id != "', "quoted-run' or 1 == 1 //", 'x"\n| take 1000 //'):
            assert source.run_history(RunQuery(hostile)) == []
            assert source.run_history(RunQuery("", resource_uid=hostile)) == []
        assert source.run_history(RunQuery("quoted-run", kind="Job")) == []
    finally:
        source.close()
