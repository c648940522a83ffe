"""``experiment offload metrics --remote-write-endpoint``: Prometheus remote write to a loopback adx-mon
(real HTTP, real snappy + protobuf), per-chunk checkpoints, an endpoint that goes down, and the offline mode."""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_testing.kusto import LoopbackKusto, start_kusto
from taugrid_portal import offload, remote_write

TS0 = 1760000000.0


@pytest.fixture
def adxmon(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LoopbackKusto]:
    fake = start_kusto(tmp_path_factory.mktemp("adxmon"), queued=False)
    yield fake
    fake.stop()


def _chunk(directory: Path, name: str, steps: range, **extra: Any) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    rows = "".join(json.dumps({"_step": s, "_timestamp": TS0 + s, "loss": 1.0 / (s + 1), **extra}) + "\n"
                   for s in steps)
    tmp = directory / f".{name}.tmp"
    tmp.write_text(rows)
    os.replace(tmp, directory / name)
    return directory / name


def _args(tmp_path: Path, endpoint: str, *extra: str) -> list[str]:
    return ["experiment", "offload", "metrics", "--run", "r1", "--experiment", "e1", "--group", "g1",
            "--out", str(tmp_path / "out"), "--history", str(tmp_path / "hist" / "*.jsonl"),
            "--store", str(tmp_path / "store"), "--remote-write-endpoint", endpoint, "--tag", "workspace=team-a",
            *extra]


def _rows(kusto: LoopbackKusto) -> list[dict[str, Any]]:
    return kusto.store.rows("ExperimentMetrics") if "ExperimentMetrics" in kusto.store.tables else []


def _points(kusto: LoopbackKusto) -> list[tuple[str, int]]:
    return sorted((r["Labels"]["metric_name"], int(r["Labels"]["step"])) for r in _rows(kusto))


def test_a_chunk_reaches_adx_mon_with_its_labels_and_values(portal: Callable[..., Any], tmp_path: Path,
                                                            adxmon: LoopbackKusto) -> None:
    hist = _chunk(tmp_path / "hist", "a.jsonl", range(3))
    result = portal(*_args(tmp_path, adxmon.remote_write_url))
    assert result.exit_code == 0, result.stderr
    header, values = result.stdout.splitlines()[:2]
    assert "REMOTE_WRITE_SAMPLES" in header
    assert values.split()[header.split().index("REMOTE_WRITE_SAMPLES")] == "3"
    rows = sorted(_rows(adxmon), key=lambda r: int(r["Labels"]["step"]))
    assert [r["Value"] for r in rows] == [1.0, 0.5, 1.0 / 3]
    assert rows[1]["Timestamp"] == "2025-10-09T08:53:21.000000Z"  # wall_time TS0 + 1, in ms
    key = offload.load_checkpoint(tmp_path / "out")[str(hist)].sha256[:24]
    from taugrid_portal.store import ExperimentStore

    with ExperimentStore.open(tmp_path / "store") as store:
        store_id = store.source_store_id
    assert rows[1]["Labels"] == {
        "workspace_id": "team-a", "source_store_id": store_id, "project": "e1", "experiment_id": "e1",
        "run_group_id": "g1", "run_id": "r1", "metric_name": "loss", "source": "stellar-online",
        "metric_file_id": key, "metric_file_path": str(hist), "tags": '{"workspace":"team-a"}', "step": "1"}
    checkpoint = tmp_path / "out" / "metrics-chunks" / f"{key}_remote_write_checkpoint.json"
    assert json.loads(checkpoint.read_text())["complete"] is True
    read = adxmon.query('ExperimentMetrics | extend run_id = tostring(Labels.run_id) | where run_id == "r1" | count')
    assert read == [{"Count": 3}]  # read back through the real azure-kusto-data client


def test_batch_size_splits_requests(portal: Callable[..., Any], tmp_path: Path, adxmon: LoopbackKusto) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(7))
    result = portal(*_args(tmp_path, adxmon.remote_write_url, "--remote-write-batch-size", "3"))
    assert result.exit_code == 0, result.stderr
    assert adxmon.endpoint.adxmon.requests == 3
    assert _points(adxmon) == [("loss", s) for s in range(7)]


def test_a_kill_mid_chunk_then_a_replay_leaves_no_duplicate(portal: Callable[..., Any], tmp_path: Path,
                                                            adxmon: LoopbackKusto,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(5))
    _chunk(tmp_path / "hist", "b.jsonl", range(5, 9))
    real_post, calls = remote_write.RemoteWriter.post, []

    def killed_on_third_request(self: remote_write.RemoteWriter, body: bytes) -> None:
        calls.append(1)
        if len(calls) == 3:
            raise KeyboardInterrupt("killed between two requests of a chunk")
        real_post(self, body)

    monkeypatch.setattr(remote_write.RemoteWriter, "post", killed_on_third_request)
    killed = portal(*_args(tmp_path, adxmon.remote_write_url, "--remote-write-batch-size", "2"))
    assert killed.exit_code != 0 and len(calls) == 3  # the CLI edge turns the interrupt into its exit code
    monkeypatch.setattr(remote_write.RemoteWriter, "post", real_post)
    assert len(_rows(adxmon)) == 4  # chunk a: 2 requests of 2 accepted, the third never sent
    assert portal(*_args(tmp_path, adxmon.remote_write_url, "--remote-write-batch-size", "2")).exit_code == 0
    assert _points(adxmon) == [("loss", s) for s in range(9)]
    (tmp_path / "out" / offload.CHECKPOINT).unlink()  # replay every chunk: the chunk checkpoints skip the sends
    assert portal(*_args(tmp_path, adxmon.remote_write_url)).exit_code == 0
    assert _points(adxmon) == [("loss", s) for s in range(9)]


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_endpoint_that_stays_down_fails_a_one_shot_run_in_one_line(portal: Callable[..., Any],
                                                                      tmp_path: Path) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(3))
    endpoint = f"http://tau:s3cret@127.0.0.1:{_closed_port()}/receive?token=s3cret"
    result = portal(*_args(tmp_path, endpoint, "--remote-write-max-attempts", "2",
                           "--remote-write-retry-backoff", "10ms"))
    assert result.exit_code == 1
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert "remote write to http://127.0.0.1:" in lines[0] and "/receive failed after 2 attempt(s)" in lines[0]
    assert "s3cret" not in result.stderr and "Traceback" not in result.stderr
    assert offload.load_checkpoint(tmp_path / "out") == {}  # the chunk is not checkpointed


def test_endpoint_down_then_up_the_watch_loop_catches_up(tmp_path: Path, adxmon: LoopbackKusto) -> None:
    from taugrid_portal.offload_cli import build_options

    _chunk(tmp_path / "hist", "a.jsonl", range(3))
    _chunk(tmp_path / "hist", "b.jsonl", range(3, 5))
    opts = build_options({"out": str(tmp_path / "out"), "history": (str(tmp_path / "hist" / "*.jsonl"),),
                          "run": "r1", "experiment": "e1", "watch": True, "max_iterations": 3, "baseline": False,
                          "interval": "10ms", "store": str(tmp_path / "store"),
                          "remote_write_endpoint": adxmon.remote_write_url, "remote_write_max_attempts": 2,
                          "remote_write_retry_backoff": "10ms"})
    targets = offload.open_targets(opts)
    adxmon.endpoint.adxmon.down = True
    seen: list[tuple[int, int, str]] = []

    def emit(iteration: int, result: offload.PassResult, completed: bool) -> None:
        seen.append((iteration, result.remote_write_samples, targets.remote_error))

    def sleep(_seconds: float) -> None:
        adxmon.endpoint.adxmon.down = False  # adx-mon is back before the second pass

    try:
        offload.watch(opts, targets, emit, sleep=sleep)
    finally:
        targets.close()
    assert seen[0][1] == 0 and "failed after 2 attempt(s)" in seen[0][2]
    assert seen[1][1:] == (5, "")
    assert _points(adxmon) == [("loss", s) for s in range(5)]
    assert sorted(offload.load_checkpoint(tmp_path / "out")) == sorted(str(p) for p in (tmp_path / "hist").iterdir())


def test_hostile_label_values_arrive_intact_and_no_env_value_is_sent(portal: Callable[..., Any], tmp_path: Path,
                                                                     adxmon: LoopbackKusto) -> None:
    names = ['we"ird\nname{a="b"}', "ünïcode/π", "comma,=,sep", "x" * 2000]
    (tmp_path / "hist").mkdir()
    rows = [{"_step": 0, "_timestamp": TS0, **{n: 1.5 for n in names}}]
    (tmp_path / "hist" / "a.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    env = {"TAU_METRICS_OFFLOAD_KUSTO_SECRET_TEST": "env-secret-value", "AZURE_CLIENT_SECRET": "env-secret-value"}
    result = portal(*_args(tmp_path, adxmon.remote_write_url, "--tag", 'note=a "quoted"\nvalue'), env=env)
    assert result.exit_code == 0, result.stderr
    got = {r["Labels"]["metric_name"] for r in _rows(adxmon)}
    assert got == set(names)
    assert all(json.loads(r["Labels"]["tags"]) == {"note": 'a "quoted"\nvalue', "workspace": "team-a"}
               for r in _rows(adxmon))
    assert "env-secret-value" not in json.dumps(_rows(adxmon))


def test_offline_mode_twice_gives_identical_files_and_one_remote_write(portal: Callable[..., Any], tmp_path: Path,
                                                                       adxmon: LoopbackKusto) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(4))
    _chunk(tmp_path / "hist", "b.jsonl", range(4, 6))
    online = ["experiment", "offload", "metrics", "--run", "r1", "--experiment", "e1", "--out",
              str(tmp_path / "online"), "--history", str(tmp_path / "hist" / "*.jsonl"), "--store", str(tmp_path / "s")]
    assert portal(*online).exit_code == 0
    offline = ["experiment", "offload", "metrics", "--out", str(tmp_path / "out"), "--store", str(tmp_path / "s"),
               "--remote-write-endpoint", adxmon.remote_write_url, "-o", "json"]
    first = portal(*offline)
    assert first.exit_code == 0, first.stderr
    spool, checkpoint = tmp_path / "out" / "TauExpMetrics.jsonl", tmp_path / "out" / "metrics_offload_checkpoint.json"
    data, doc = spool.read_bytes(), json.loads(checkpoint.read_text())
    assert json.loads(first.stdout)["remote_write_samples"] == 6
    second = portal(*offline)
    assert second.exit_code == 0, second.stderr
    assert spool.read_bytes() == data
    again = json.loads(checkpoint.read_text())
    assert again["exported_at"] == doc["exported_at"] and again["rows"] == 6
    assert doc["schema_version"] == "tau.metrics.offload.v1" and doc["metrics_file"] == str(spool)
    assert json.loads(second.stdout)["remote_write_samples"] == 0 and json.loads(second.stdout)["remote_write_skipped"]
    assert adxmon.endpoint.adxmon.requests == 1
    assert _points(adxmon) == [("loss", s) for s in range(6)]
    rows = [json.loads(line) for line in data.splitlines()]
    assert {r["run_id"] for r in rows} == {"r1"} and {r["experiment_id"] for r in rows} == {"e1"}
    assert (tmp_path / "out" / "metrics_remote_write_checkpoint.json").exists()


def test_offline_mode_resumes_an_interrupted_remote_write_and_needs_a_store(portal: Callable[..., Any],
                                                                            tmp_path: Path, adxmon: LoopbackKusto,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    _chunk(tmp_path / "hist", "a.jsonl", range(5))
    assert portal("experiment", "offload", "metrics", "--run", "r1", "--experiment", "e1", "--out",
                  str(tmp_path / "online"), "--history", str(tmp_path / "hist" / "*.jsonl"), "--store",
                  str(tmp_path / "s")).exit_code == 0
    offline = ["experiment", "offload", "metrics", "--out", str(tmp_path / "out"), "--store", str(tmp_path / "s"),
               "--remote-write-endpoint", adxmon.remote_write_url, "--remote-write-batch-size", "2"]
    adxmon.endpoint.adxmon.down = True  # adx-mon goes away after the first request
    real_post = remote_write.RemoteWriter.post

    def first_then_down(self: remote_write.RemoteWriter, body: bytes) -> None:
        adxmon.endpoint.adxmon.down = self.requests >= 1
        real_post(self, body)

    monkeypatch.setattr(remote_write.RemoteWriter, "post", first_then_down)
    failed = portal(*offline, "--remote-write-max-attempts", "1")
    assert failed.exit_code == 1 and "/receive failed after 1 attempt(s)" in failed.stderr
    assert len(_rows(adxmon)) == 2
    monkeypatch.setattr(remote_write.RemoteWriter, "post", real_post)
    adxmon.endpoint.adxmon.down = False
    assert portal(*offline).exit_code == 0  # resumes after the accepted request
    assert _points(adxmon) == [("loss", s) for s in range(5)]
    missing = portal("experiment", "offload", "metrics", "--out", str(tmp_path / "o2"), "--store",
                     str(tmp_path / "nowhere"))
    assert missing.exit_code != 0 and "Traceback" not in missing.stderr and "nowhere" in missing.stderr
