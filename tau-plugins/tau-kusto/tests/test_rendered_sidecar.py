"""The metrics-offload sidecar exactly as a Job renders it (with the platform's Kusto policy), run as a local
process: its own command and args, its mount paths mapped to local directories, shipping to the loopback
endpoint.  Only the credential differs: ``sidecar_main.py`` hands the sink the loopback token where a cluster
pod signs in with its workload identity."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from tau_core.config import load_config
from tau_core.kql import MetricsFilter, metrics_query
from tau_core.rendering import RenderRequest
from tau_core.rendering.engine import render
from tau_testing.kusto import LoopbackKusto

MAIN = Path(__file__).with_name("sidecar_main.py")
IMAGE = "registry.example.com/taugrid-portal@sha256:" + "c" * 64
CONFIG = """\
name: train
engine: job
entrypoint: train.py
runtime:
  image: python:3.12
compute:
  gpus: 0
policy:
  namespace: team-k
  queue: team-q
  workspace: ws-rendered
storage:
  data_pvc: blob
  output: /data/runs/train
metrics:
  history: [h/*.jsonl]
  offload:
    enabled: true
experiment:
  project: rendered-proj
  name: rendered-exp
"""


def _sidecar(tmp_path: Path, kusto: LoopbackKusto, **env: str) -> dict[str, Any]:
    (tmp_path / "tau.yaml").write_text(CONFIG)
    (tmp_path / "train.py").write_text("print('hi')\n")
    cfg = load_config(tmp_path / "tau.yaml")
    request = RenderRequest(name="train", config=cfg.normalized, context={"namespace": "team-k"},
                            sources=cfg.sources, config_hash=cfg.config_hash,
                            submission_id="0123456789abcdef01234567", config_dir=tmp_path,
                            env={"TAU_METRICS_OFFLOAD_IMAGE": IMAGE,
                                 "TAU_METRICS_OFFLOAD_ADX_CLUSTER_URI": kusto.query_url, **env})
    [job] = render(request)
    return next(c for c in job["spec"]["template"]["spec"]["initContainers"] if c["name"] == "metrics-offload")


def _local(value: str, mounts: dict[str, Path]) -> str:
    for mount, host in mounts.items():
        if value == mount or value.startswith(mount + "/"):
            return str(host) + value[len(mount):]
    return value


def _run(sidecar: dict[str, Any], tmp_path: Path, pod_env: dict[str, str]) -> None:
    """Run the rendered sidecar as a local process while a trainer writes 25 steps, then complete the run."""
    mounts = {m["mountPath"]: tmp_path / "vol" / m["name"] for m in sidecar["volumeMounts"]}
    for host in mounts.values():
        host.mkdir(parents=True)
    argv = [_local(a, mounts) for a in sidecar["args"]]
    env = {e["name"]: _local(e["value"], mounts) for e in sidecar["env"] if "value" in e}
    proc = subprocess.Popen([sys.executable, str(MAIN), *argv], env={**os.environ, **env, **pod_env}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready = Path(_local("/var/run/tau/metrics-ready", mounts))
        deadline = time.monotonic() + 90
        while not ready.exists():  # the baseline is taken: what the trainer writes from now on is shipped
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the sidecar never became ready"
            time.sleep(0.05)
        history = Path(_local("/data/runs/train/h", mounts))
        history.mkdir(parents=True, exist_ok=True)
        rows = "".join(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s, "loss": 1.0 / (s + 1)}) + "\n"
                       for s in range(25))
        (history / ".c0.tmp").write_text(rows)
        os.replace(history / ".c0.tmp", history / "c000.jsonl")
        Path(_local("/var/run/tau/metrics-completion.json", mounts)).write_text(
            '{"state":"succeeded","completed_at":"2026-12-03T04:00:00Z"}')
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err
    assert Path(_local("/var/run/tau/metrics-done", mounts)).read_text() == "done\n"


def test_the_rendered_sidecar_ships_to_kusto(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    (tmp_path / "repo").mkdir()
    sidecar = _sidecar(tmp_path / "repo", kusto_up)
    assert sidecar["command"] == ["taugrid-portal"]
    assert sidecar["args"][sidecar["args"].index("--kusto-endpoint") + 1] == kusto_up.query_url
    _run(sidecar, tmp_path, {})
    kusto_up.drain()
    shipped = kusto_up.query(metrics_query(MetricsFilter(runs=("train",), metrics=("loss",), since="3650d",
                                                         target_points=1000)))
    assert [int(r["step"]) for r in shipped] == list(range(25))
    events = [r for r in kusto_up.store.rows("TauExpMetricEventsV1") if r["run_id"] == "train"]
    assert {(r["namespace"], r["workspace_id"], r["project"]) for r in events} == {
        ("team-k", "ws-rendered", "rendered-proj")}


def test_the_rendered_sidecar_remote_writes_to_adx_mon_on_its_node(kusto_up: LoopbackKusto, tmp_path: Path) -> None:
    """The platform's ``http://${NODE_IP}:3100/receive`` form: the sidecar expands ``NODE_IP`` (the pod gets it
    from the downward API) and remote-writes every step to the loopback adx-mon beside the Kusto shipping."""
    (tmp_path / "repo").mkdir()
    endpoint = "http://${NODE_IP}:" + str(kusto_up.port) + "/receive"
    sidecar = _sidecar(tmp_path / "repo", kusto_up, TAU_METRICS_OFFLOAD_REMOTE_WRITE_ENDPOINT=endpoint)
    assert sidecar["args"][sidecar["args"].index("--remote-write-endpoint") + 1] == endpoint
    assert {"name": "NODE_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}} in sidecar["env"]
    before = len(kusto_up.store.rows("ExperimentMetrics")) if "ExperimentMetrics" in kusto_up.store.tables else 0
    _run(sidecar, tmp_path, {"NODE_IP": "127.0.0.1"})
    rows = kusto_up.store.rows("ExperimentMetrics")[before:]
    assert sorted(int(r["Labels"]["step"]) for r in rows) == list(range(25))
    assert {(r["Labels"]["run_id"], r["Labels"]["workspace_id"], r["Labels"]["project"]) for r in rows} == {
        ("train", "ws-rendered", "rendered-proj")}
