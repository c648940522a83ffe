"""resolve_run is a pipeline of named steps; every value a step decides is recorded with its source."""

from __future__ import annotations

from pathlib import Path

from tau_core.config import resolve
from tau_core.config.resolve import RunOptions, resolve_offline
from tau_core.rendering import RenderContext


def _config(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".git").mkdir()
    path = tmp_path / "tau.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_the_steps_are_named_and_ordered() -> None:
    names = [step.__name__.lstrip("_") for step in resolve.STEPS]
    assert names == ["config_kind", "connection", "workspace", "namespace", "workload_profile", "gpu_cardinality",
                     "queue", "workspace_values", "unresolved"]


def test_each_value_records_the_step_and_source_that_decided_it(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "name: tr\nengine: job\ncompute:\n  gpus: 0\npolicy:\n  queue: lq\n")
    res = resolve_offline(RunOptions(config=cfg, cwd=tmp_path, namespace="team-a", env={}))
    trail = {(key, step, source) for step, key, source in res.trail}
    assert ("namespace", "namespace", "flag") in trail
    assert ("queue", "queue", "config") in trail
    assert isinstance(res.request.context, RenderContext)
    assert res.request.context.namespace == "team-a" and res.request.context.queue == "lq"
    assert res.request.sources["context.namespace"] == "flag"


def test_unresolved_values_become_placeholders_in_the_unresolved_step(tmp_path: Path) -> None:
    cfg = _config(tmp_path, "name: ph\nengine: job\ncompute:\n  gpus: 0\n")
    res = resolve_offline(RunOptions(config=cfg, cwd=tmp_path, env={}))
    steps = {key: (step, source) for step, key, source in res.trail}
    assert steps["namespace"] == ("unresolved", "cluster (unresolved)")
    assert steps["queue"] == ("unresolved", "cluster (unresolved)")
    assert res.request.context.namespace == "<unresolved-namespace>"
