"""The loopback adx-mon receiver (``POST /receive``): real HTTP, real snappy + protobuf, rows in the loopback
Kusto's ``ExperimentMetrics`` with the reference's columns, and the refusals a real receiver gives."""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_core import promwrite
from tau_testing.kusto import LoopbackKusto, start_kusto
from tau_testing.kusto.adxmon import COLUMNS, series_id, table_name


@pytest.fixture
def adxmon(tmp_path: Path) -> Iterator[LoopbackKusto]:
    fake = start_kusto(tmp_path, queued=False)
    yield fake
    fake.stop()


def _post(url: str, body: bytes, headers: dict[str, str]) -> int:
    try:
        with urllib.request.urlopen(urllib.request.Request(url, data=body, headers=headers, method="POST")) as r:
            return int(r.status)
    except urllib.error.HTTPError as exc:
        return int(exc.code)


def test_a_write_request_becomes_rows_with_the_reference_columns(adxmon: LoopbackKusto) -> None:
    batch = [promwrite.series("experiment_metrics", [("run_id", "r1"), ("step", str(s)), ("pod", "p-0"),
                                                     ("metric_name", "lone\ud800"), ("unit", "")], s / 2,
                              1760000000000 + s) for s in range(3)]
    assert _post(adxmon.remote_write_url, promwrite.encode(batch), promwrite.HEADERS) == 204
    rows = adxmon.store.rows("ExperimentMetrics")
    assert [c for c, _ in adxmon.store.tables["ExperimentMetrics"].columns] == [c for c, _ in COLUMNS]
    assert [r["Value"] for r in rows] == [0.0, 0.5, 1.0]
    assert rows[2]["Timestamp"] == "2025-10-09T08:53:20.002000Z"
    assert rows[0]["Labels"] == {"metric_name": "lone?", "pod": "p-0", "run_id": "r1", "step": "0"}  # no empty unit
    assert rows[0]["Pod"] == "p-0" and rows[0]["Cluster"] == "loopback"
    assert rows[0]["SeriesId"] == series_id(batch[0].labels) != rows[1]["SeriesId"]
    assert adxmon.endpoint.adxmon.samples == 3 and table_name("experiment_metrics") == "ExperimentMetrics"


def test_the_receiver_refuses_what_adx_mon_refuses(adxmon: LoopbackKusto) -> None:
    body = promwrite.encode([promwrite.series("experiment_metrics", [("run_id", "r1")], 1.0, 1)])
    assert _post(adxmon.remote_write_url, body, {**promwrite.HEADERS, "Content-Encoding": "gzip"}) == 415
    assert _post(adxmon.remote_write_url, b"not snappy at all", promwrite.HEADERS) == 400
    adxmon.endpoint.adxmon.down = True
    assert _post(adxmon.remote_write_url, body, promwrite.HEADERS) == 503
    adxmon.endpoint.adxmon.down = False
    assert _post(adxmon.remote_write_url, body, promwrite.HEADERS) == 204
    assert adxmon.endpoint.adxmon.refused == 2 and len(adxmon.store.rows("ExperimentMetrics")) == 1
    with pytest.raises(promwrite.DecodeError):
        promwrite.decode(b"\x05garbage")
