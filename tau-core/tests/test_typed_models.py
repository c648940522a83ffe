"""Typed models at the edges: the catalog-generated run config, the render context and the workspace
defaults and pins.  Each is checked against its source of truth and round-trips through cattrs."""

from __future__ import annotations

import types
import typing
from pathlib import Path
from typing import Any, Union

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tau_core.config import load_config, modelgen, run_model
from tau_core.config.catalog import canonical_fields
from tau_core.config.validate import get_path
from tau_core.config.workspace import WorkspaceDefaults, WorkspacePins
from tau_core.errors import ConfigError
from tau_core.rendering import RenderContext, RenderRequest
from tau_core.rendering.context import RetryInfo

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CONFIGS = sorted(p for p in REPO.glob("examples/*/tau/*.yaml")  # direct configs (not SDK manifests)
                         if "connection" not in p.name and "schema_version:" not in p.read_text())

# -- strategies derived from the attrs classes' own annotations -----------------------------------

_TEXT = st.text(max_size=12)
_SCALAR = st.one_of(st.none(), st.booleans(), st.integers(-5, 5), _TEXT)


def _strategy(tp: Any) -> st.SearchStrategy[Any]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return st.one_of(*[_strategy(arg) for arg in typing.get_args(tp)])
    if tp is type(None):
        return st.none()
    if tp is Any:
        return _SCALAR
    if attrs.has(tp):
        return _builds(tp)
    if origin is list:
        return st.lists(_strategy(typing.get_args(tp)[0]), max_size=3)
    if origin is tuple:
        return st.lists(_strategy(typing.get_args(tp)[0]), max_size=3).map(tuple)
    if origin is dict or (origin is not None and getattr(origin, "__name__", "") == "Mapping"):
        return st.dictionaries(_TEXT, _strategy(typing.get_args(tp)[1]), max_size=3)
    return {str: _TEXT, int: st.integers(-10**6, 10**6), bool: st.booleans()}[tp]


def _builds(cls: type) -> st.SearchStrategy[Any]:
    hints = typing.get_type_hints(cls)
    fields = {f.name: _strategy(hints[f.name]) for f in attrs.fields(cls) if f.name != "managed"}
    return st.builds(cls, **fields)


# -- the run config: generated from the catalog ---------------------------------------------------


def test_run_config_model_is_generated_from_the_catalog() -> None:
    """The shipped module is exactly what the generator writes from today's catalog
    (regenerate: python -m tau_core.config.modelgen)."""
    assert modelgen.TARGET.read_text(encoding="utf-8") == modelgen.generate()


def test_every_canonical_catalog_path_is_a_model_field() -> None:
    blank = run_model.normalized(run_model.RunConfig())
    for f in canonical_fields():
        parent, _, leaf = f.path.rpartition(".")
        node = get_path(blank, parent) if parent else blank
        assert isinstance(node, dict) and leaf in node, f.path


@pytest.mark.parametrize("path", EXAMPLE_CONFIGS, ids=[f"{p.parent.parent.name}/{p.stem}" for p in EXAMPLE_CONFIGS])
def test_example_configs_round_trip_through_the_model(path: Path) -> None:
    validated = load_config(path)
    model = validated.model
    assert run_model.normalized(model) == validated.normalized
    assert model.name == validated.normalized["name"]
    assert model.resilience.max_retries == validated.normalized["resilience"]["max_retries"]


def test_a_key_the_catalog_does_not_know_is_refused() -> None:
    validated = load_config(REPO / "examples/kind-smoke/tau/job.yaml")
    data = {**validated.normalized, "compute": {**validated.normalized["compute"], "gpu_count": 1}}
    with pytest.raises(ConfigError, match="gpu_count"):
        run_model.run_config(data)


@settings(max_examples=60, deadline=None)
@given(_builds(run_model.RunConfig))
def test_run_config_round_trips(config: run_model.RunConfig) -> None:
    assert run_model.run_config(run_model.normalized(config)) == config


# -- the render context -----------------------------------------------------------------------------


@settings(max_examples=80, deadline=None)
@given(_builds(RenderContext))
def test_render_context_round_trips(context: RenderContext) -> None:
    back = RenderContext.from_mapping(context.to_dict())
    # empty strings mean "unset" at the edge (as the old mapping's ctx() treated them)
    expected = attrs.evolve(context, **{f.name: None for f in attrs.fields(RenderContext)
                                        if getattr(context, f.name) == ""})
    assert back == expected
    assert dict(back) == back.to_dict()


def test_render_context_folds_aliases_and_reads_like_the_old_mapping() -> None:
    ctx = RenderContext.from_mapping({"namespace": "ns", "workspace_uid": "u1", "priority_class": "high",
                                      "retry": {"attempt": 2, "max": 3, "reason": "Preempted"},
                                      "tau_command": ["tau", "run"], "dry_run": "", "unknown": 1})
    assert ctx.workspace_id == "u1" and ctx.workload_priority_class == "high"
    assert ctx.retry == RetryInfo(attempt=2, max=3, reason="Preempted")
    assert ctx.dry_run is None and ctx.tau_command == ("tau", "run")
    assert ctx["namespace"] == "ns" and ctx.get("auto_retry", True) is True and "unknown" not in ctx
    assert ctx.to_dict()["retry"] == {"attempt": 2, "max": 3, "reason": "Preempted"}
    both = RenderContext.from_mapping({"workspace_uid": "old", "workspace_id": "new"})
    assert both.workspace_id == "new"  # the canonical key wins over its alias


def test_render_request_converts_a_mapping_context_at_construction() -> None:
    request = RenderRequest(name="r", config={"engine": "job"}, context={"namespace": "ns", "queue": ""})
    assert isinstance(request.context, RenderContext)
    assert request.ctx("namespace") == "ns" and request.ctx("queue", "fallback") == "fallback"
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        request.context.namespace = "other"  # type: ignore[misc]


# -- workspace defaults and pins ---------------------------------------------------------------------


@settings(max_examples=60, deadline=None)
@given(_builds(WorkspaceDefaults))
def test_workspace_defaults_round_trip(defaults: WorkspaceDefaults) -> None:
    back = WorkspaceDefaults.from_mapping(defaults.to_dict())
    assert back == attrs.evolve(defaults, **{f.name: None for f in attrs.fields(WorkspaceDefaults)
                                             if getattr(defaults, f.name) == ""})


@settings(max_examples=60, deadline=None)
@given(_builds(WorkspacePins), _builds(WorkspacePins))
def test_workspace_pins_round_trip_and_drift(pins: WorkspacePins, verified: WorkspacePins) -> None:
    clean = attrs.evolve(pins, **{f.name: None for f in attrs.fields(WorkspacePins) if getattr(pins, f.name) == ""})
    assert WorkspacePins.from_mapping(pins.to_dict()) == clean
    drift = pins.drift(verified)
    for name, (old, new) in drift.items():
        assert old is not None and old != new and getattr(verified, name) == new
    assert pins.drift(pins) == {}


def test_workspace_defaults_from_a_resolver_answer() -> None:
    defaults = WorkspaceDefaults.from_mapping({"namespace": "team-a", "queue": "lq", "workload_identity": "true",
                                               "output_root": "", "extra": "ignored"})
    assert defaults == WorkspaceDefaults(namespace="team-a", queue="lq", workload_identity=True)
    assert WorkspaceDefaults.from_mapping(None) == WorkspaceDefaults()
