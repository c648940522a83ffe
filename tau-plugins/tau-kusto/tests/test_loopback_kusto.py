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
