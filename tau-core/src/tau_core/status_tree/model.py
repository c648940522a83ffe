"""The status tree as a typed model: frozen attrs classes built from a :class:`~tau_core.lifecycle.RunStatus`,
converted with cattrs for ``tau run status -o json``, and rendered as text for the table form.

The JSON field names are camelCase (``failureEvidence``, ``elapsedSeconds``, ...); ``runProfile`` appears
only when ``--run-profile`` added one.  The cattrs converter is built on first use (keeps ``--help`` light).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

import attrs

from tau_core.lifecycle.base import Phase, RunStatus

if TYPE_CHECKING:
    import cattrs


@attrs.frozen
class PhaseView:
    """One phase of the tree: ``[x] Submitted  batch/v1 Job created (3s)``."""

    name: str
    state: str
    detail: str = ""
    hint: str | None = None
    elapsed_seconds: float | None = None


@attrs.frozen
class PodView:
    name: str | None
    phase: str | None = None
    node: str | None = None
    containers: tuple[str | None, ...] = ()
    restarts: int = 0


@attrs.frozen
class RetryView:
    """A retry that is coming: who owns it, the next attempt ``k/N`` and the seconds left of the backoff."""

    owner: str
    attempt: int
    max: int
    in_seconds: float


@attrs.frozen
class StatusTree:
    """What ``tau run status`` reports about one run, in the order of its JSON document."""

    name: str
    namespace: str | None
    context: str | None
    workspace: str | None
    kind: str
    queue: str | None
    terminal: bool
    succeeded: bool
    failure: str | None
    failure_evidence: str | None
    attempt: int | None
    max_retries: int | None
    retry: RetryView | None
    message: str
    phases: tuple[PhaseView, ...]
    pods: tuple[PodView, ...] = ()
    diagnostic_commands: tuple[str, ...] = ()
    run_profile: Any = None

    @classmethod
    def from_status(cls, st: RunStatus) -> StatusTree:
        extra = st.extra
        pending = extra.retry_pending
        retry = RetryView(pending.owner, pending.attempt, pending.max, pending.in_seconds) if pending else None
        return cls(
            name=st.ref.name, namespace=st.ref.namespace, context=st.ref.context, workspace=st.ref.workspace,
            kind=st.kind, queue=extra.queue, terminal=st.terminal, succeeded=st.succeeded,
            failure=st.failure.value if st.failure else None,
            failure_evidence=extra.failure_evidence or None, attempt=st.attempt, max_retries=st.max_attempts,
            retry=retry, message=st.message,
            phases=tuple(PhaseView(p.name, p.state, p.detail, p.hint, p.elapsed_seconds) for p in st.phases),
            pods=tuple(PodView(p.name, p.phase, p.node, p.containers, p.restarts) for p in extra.pods),
            diagnostic_commands=extra.diagnostic_commands, run_profile=extra.run_profile)

    def to_json(self) -> dict[str, Any]:
        """The ``-o json`` document."""
        doc: dict[str, Any] = status_converter().unstructure(self)
        return doc

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> StatusTree:
        tree: StatusTree = status_converter().structure(dict(doc), cls)
        return tree


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


@cache
def status_converter() -> cattrs.Converter:
    """The cattrs converter for the status models (built once, on first use)."""
    import cattrs
    from cattrs.gen import make_dict_structure_fn, make_dict_unstructure_fn, override

    converter = cattrs.Converter()
    for model in (PhaseView, PodView, RetryView, StatusTree):
        renames: dict[str, Any] = {f.name: override(rename=_camel(f.name)) for f in attrs.fields(model)
                                   if "_" in f.name}
        if model is StatusTree:
            renames["run_profile"] = override(rename="runProfile", omit_if_default=True)
        converter.register_unstructure_hook(model, make_dict_unstructure_fn(model, converter, **renames))
        converter.register_structure_hook(model, make_dict_structure_fn(model, converter, **renames))
    return converter


def first_failure(tree: Iterable[Phase]) -> Phase | None:
    for p in tree:
        if p.state == "warning":
            return p
    return None


def render_tree(tree: Iterable[Phase], *, markers: Mapping[str, str] | None = None) -> list[str]:
    """Text lines of the phase tree: ``[x] Submitted  batch/v1 Job created (3s)`` plus ``tip:`` lines."""
    from tau_core.lifecycle.base import PHASE_STATES

    marks = markers or PHASE_STATES
    items = list(tree)
    width = max((len(p.name) for p in items), default=0)
    lines = []
    for p in items:
        elapsed = f" ({format_duration(p.elapsed_seconds)})" if p.elapsed_seconds is not None else ""
        lines.append(f"  {marks.get(p.state, '[?]')} {p.name.ljust(width)}  {p.detail}{elapsed}".rstrip())
        if p.hint:
            lines.append(f"      tip: {p.hint}")
    return lines


def format_duration(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{(s % 3600) // 60:02d}m"
