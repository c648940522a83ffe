"""The typed models travel across the module boundaries: a render request carries the catalog's
``RunConfig``, a submit request the same ``RunConfig`` and the ``RenderContext`` it was rendered with, and a
workspace connection reports and checks its pins as ``WorkspacePins``."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import attrs
import pytest

from tau_core.config import load_config
from tau_core.config.run_model import RunConfig
from tau_core.config.workspace import WorkspacePins
from tau_core.errors import ConfigError, TauError
from tau_core.lifecycle.base import SubmitRequest
from tau_core.rendering import RenderContext, RenderRequest, ttl_seconds
from tau_core.rendering.context import RetryInfo
from tau_core.workspace import connection as conn

REPO = Path(__file__).resolve().parents[2]


def test_render_request_carries_the_typed_run_config() -> None:
    cfg = load_config(REPO / "examples" / "kind-smoke" / "tau" / "job.yaml")
    request = RenderRequest(name="r", config=cfg.normalized, context={"namespace": "ns"})
    assert isinstance(request.config, RunConfig)
    assert request.config == cfg.model
    assert request.normalized == dict(cfg.normalized)  # the mapping view round-trips exactly
    assert request.kind == "Job"
    assert RenderRequest(name="r", config=request.config).config is request.config  # no second conversion


def test_render_request_refuses_a_key_the_catalog_does_not_describe() -> None:
    with pytest.raises(ConfigError, match="does not match the field catalog"):
        RenderRequest(name="r", config={"engine": "job", "compute": {"gpus": 1, "gpu_count": 2}})


def test_helpers_read_attributes_of_the_typed_config() -> None:
    config = RenderRequest(name="r", config={"run": {"ttl_seconds_after_finished": 60}}).config
    assert ttl_seconds(config, "Job") == 60
    bad = RenderRequest(name="r", config={"run": {"ttl_seconds_after_finished": 0}}).config
    with pytest.raises(ConfigError, match="ttl_seconds_after_finished"):
        ttl_seconds(bad, "Job")


def _submit(context: Any) -> SubmitRequest:
    return SubmitRequest(name="r", config={}, objects=[], context=context)


def test_submit_request_context_is_the_typed_render_context() -> None:
    typed = RenderContext(namespace="ns", dry_run="server", retry=RetryInfo(attempt=1, max=2, reason="OOMKilled"))
    assert _submit(typed).context is typed  # carried as is, end to end
    converted = _submit({"namespace": "ns", "workspace_uid": "u1", "auto_retry": "false", "unknown": 1})
    assert isinstance(converted.context, RenderContext)
    assert converted.context.workspace_id == "u1" and converted.context.auto_retry is False
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        converted.context.namespace = "other"  # type: ignore[misc]


def test_connection_reports_its_pins_typed() -> None:
    c = conn.Connection(workspace="w", workspace_uid="u1", namespace="ns", queue="q", service_account=None,
                        context_name="ctx", system_namespace="tau-system", kubeconfig_path="/k", authorization_mode=None,
                        descriptor_path="/d", descriptor_digest="sha256:x")
    assert c.pins == WorkspacePins(workspace_uid="u1", namespace="ns", queue="q")


class _Descriptor:
    workspace = "w"


def test_drift_of_a_pin_asks_and_a_refusal_keeps_the_pins() -> None:
    pinned = WorkspacePins(workspace_uid="u1", namespace="ns", queue="q")
    asked: list[str] = []

    def refuse(review: str, question: str) -> bool:
        asked.append(review)
        return False

    conn._confirm_drift(_Descriptor(), pinned, WorkspacePins(workspace_uid="u1", namespace="ns", queue="q",  # type: ignore[arg-type]
                                                             service_account="sa"), refuse)
    assert asked == []  # an unpinned field (service account) never drifts
    with pytest.raises(TauError, match="not confirmed"):
        conn._confirm_drift(_Descriptor(), pinned, WorkspacePins(workspace_uid="u2", namespace="ns2", queue="q"),  # type: ignore[arg-type]
                            refuse)
    assert "workspace_uid 'u1' -> 'u2'" in asked[0] and "namespace 'ns' -> 'ns2'" in asked[0]
    conn._confirm_drift(_Descriptor(), None, WorkspacePins(namespace="x"), refuse)  # type: ignore[arg-type]
    assert len(asked) == 1  # nothing pinned yet: nothing to review


def test_submit_request_config_is_the_typed_run_config() -> None:
    from tau_core.retry import RetryPolicy, checkpoint_path

    cfg = load_config(REPO / "examples" / "kind-smoke" / "tau" / "job.yaml")
    model = cfg.model
    typed = SubmitRequest(name="r", config=model, objects=[], context={})
    assert typed.config is model  # carried as is, no second conversion
    partial = SubmitRequest(name="r", config={"resilience": {"max_retries": 2, "backoff_initial": "10s"}},
                            objects=[], context={})
    assert isinstance(partial.config, RunConfig) and partial.config.resilience.max_retries == 2
    policy = RetryPolicy.from_config("r", partial.config)  # the backends read attributes, not dotted keys
    assert (policy.max_retries, policy.retry_on, policy.backoff_initial) == (2, ("Preempted", "Evicted"), 10.0)
    assert checkpoint_path("r", partial.config) == "/data/checkpoints/finetunes/r"
    with pytest.raises(ConfigError, match="does not match the field catalog"):
        SubmitRequest(name="r", config={"resilience": {"retries": 2}}, objects=[], context={})


def test_run_status_details_are_typed_and_a_mapping_is_converted_at_the_edge() -> None:
    from tau_core.lifecycle.base import RunRef, RunStatus
    from tau_core.lifecycle.details import LocalAttempt, PendingRetry, PodSummary, StatusDetails

    st = RunStatus(RunRef("r"), "AcmeJob", [], True, False, extra={
        "exists": True, "queue": "q", "retry_pending": {"owner": "cli", "attempt": 2, "max": 3, "inSeconds": 4},
        "pods": [{"name": "p", "containers": ["main"]}], "attempts": [{"attempt": 1, "reason": "OOMKilled",
                                                                        "exit_code": 137, "later": "dropped"}],
        "not-a-field": 1})
    assert isinstance(st.extra, StatusDetails) and st.extra.exists and st.extra.queue == "q"
    assert st.extra.retry_pending == PendingRetry(owner="cli", attempt=2, max=3, in_seconds=4.0)
    assert st.extra.pods == (PodSummary(name="p", containers=("main",)),)
    assert st.extra.attempts == (LocalAttempt(attempt=1, reason="OOMKilled", exit_code=137),)
    assert RunStatus(RunRef("r"), "Job", [], False, False).extra == StatusDetails()  # nothing said: all unset
    typed = StatusDetails(state="Running")
    assert RunStatus(RunRef("r"), "local", [], False, False, extra=typed).extra is typed
