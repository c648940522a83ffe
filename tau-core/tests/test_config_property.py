"""Property tests: random YAML and random mutations of valid configs either validate or fail cleanly."""

from __future__ import annotations

import copy
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core.config import ConfigValidationError, ManagedManifestError, validate_document
from tau_core.config.catalog import FIELDS
from tau_core.config.loader import parse_yaml
from tau_core.config.structure import Walker, schema_accepts
from tau_core.errors import TauError

BASE: dict[str, Any] = {
    "name": "prop-run",
    "engine": "job",
    "compute": {"gpus": 1, "cpu_request": "2", "memory_limit": "8Gi"},
    "runtime": {"image": "python:3.12", "env": {"A": "b"}},
    "policy": {"namespace": "research", "queue": "jobqueue", "gpu_class": "a100-80gb", "lane": "training"},
    "storage": {"data_pvc": "training-data", "output": "/data/runs/prop-run", "checkpoint": "best/model.bin"},
    "resilience": {"max_retries": 2, "retry_on": ["Preempted", "oomkilled"]},
    "experiment": {"project": "p", "name": "e"},
}

scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**12, 10**12), st.floats(allow_nan=True),
                    st.text(max_size=20))
values = st.recursive(scalars, lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                         st.dictionaries(st.text(max_size=12), inner, max_size=4)),
                      max_leaves=12)
paths = st.sampled_from([f.path.replace("[]", "") for f in FIELDS])


def _check(text: str) -> None:
    try:
        doc = parse_yaml(text, "prop.yaml")
        validate_document(doc, check_files=False)
    except (ConfigValidationError, ManagedManifestError) as exc:
        assert exc.message and "Traceback" not in exc.message
    except TauError as exc:
        assert exc.message


def _set(data: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = data
    for part in parts[:-1]:
        nxt = node.get(part)
        if not isinstance(nxt, dict):
            nxt = {}
            node[part] = nxt
        node = nxt
    node[parts[-1]] = value


def test_base_config_is_valid() -> None:
    validated = validate_document(parse_yaml(json.dumps(BASE), "base.yaml"), check_files=False)
    assert validated.normalized["resilience"]["retry_on"] == ["Preempted", "OOMKilled"]


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=300))
def test_random_text_never_crashes(text: str) -> None:
    _check(text)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.dictionaries(st.text(max_size=15), values, max_size=6))
def test_random_documents_never_crash(data: dict[str, Any]) -> None:
    text = json.dumps(data, default=str)
    _check(text)
    try:
        doc = parse_yaml(text, "prop.yaml")
    except ConfigValidationError:
        return
    from tau_core.config.validate import _prenormalize

    pre = _prenormalize(doc.data, doc, [])
    assert schema_accepts(pre) == (Walker(doc).walk(pre) == [])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(paths, values), min_size=1, max_size=4))
def test_mutated_valid_configs_validate_or_fail_cleanly(mutations: list[tuple[str, Any]]) -> None:
    data = copy.deepcopy(BASE)
    for path, value in mutations:
        _set(data, path, value)
    try:
        text = json.dumps(data, allow_nan=False)
    except ValueError:
        return
    _check(text)
    # the compiled schema and the structural walker come from one catalog: they agree
    try:
        doc = parse_yaml(text, "prop.yaml")
    except ConfigValidationError:
        return
    from tau_core.config.validate import _prenormalize

    if isinstance(doc.data, dict):
        pre = _prenormalize(doc.data, doc, [])
        assert schema_accepts(pre) == (Walker(doc).walk(pre) == [])
