"""Typed workspace values as run resolution sees them: the defaults a TauWorkspace publishes and
the values a workspace connection pins.

Both come from outside (a resolver's answer, the connection's state file), so they are built at
that edge with :meth:`from_mapping` (cattrs; unknown keys ignored) and never travel further as
plain mappings.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any, Self

import attrs

if TYPE_CHECKING:
    import cattrs

class _Edge:
    """Built from a plain mapping at the edge (unknown keys ignored, empty values unset) and back."""

    __slots__ = ()

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any] | Self | None) -> Self:
        if values is not None and not isinstance(values, Mapping):
            return values
        data = {str(k): v for k, v in (values or {}).items() if v is not None and v != ""}
        return converter().structure(data, cls)

    def to_dict(self) -> dict[str, Any]:
        """The set fields as a plain mapping."""
        return {k: v for k, v in converter().unstructure(self).items() if v is not None}


@attrs.frozen(kw_only=True)
class WorkspaceDefaults(_Edge):
    """What the ``workspace-defaults`` resolver answers for the selected TauWorkspace (all optional)."""

    namespace: str | None = None
    """The workspace's target namespace (an explicit namespace must match it)."""
    queue: str | None = None
    """Its Kueue LocalQueue."""
    priority_tier: str | None = None
    """``normal`` (rendered as ``default``) or ``priority``."""
    service_account: str | None = None
    workload_identity: bool | None = None
    output_root: str | None = None
    """``storage.output`` defaults under it and may not leave it."""
    workspace_uid: str | None = None
    result_pvc: str | None = None


@attrs.frozen(kw_only=True)
class WorkspacePins(_Edge):
    """The values a verified workspace connection pins; a later verification that differs is drift."""

    workspace_uid: str | None = None
    namespace: str | None = None
    queue: str | None = None
    service_account: str | None = None

    def drift(self, verified: WorkspacePins) -> dict[str, tuple[str | None, str | None]]:
        """Pinned fields whose verified value differs (an unpinned field never drifts)."""
        out: dict[str, tuple[str | None, str | None]] = {}
        for field in attrs.fields(WorkspacePins):
            old, new = getattr(self, field.name), getattr(verified, field.name)
            if old is not None and old != new:
                out[field.name] = (old, new)
        return out


@attrs.frozen(kw_only=True)
class WorkspaceConnection(_Edge):
    """What the ``workspace-connection`` resolver answers, or a descriptor's offline facts (all optional).

    A verified connection (``verified``) also carries the values it pinned (namespace, queue, service account,
    workspace UID) and the TauWorkspace's published defaults, so ``workspace-defaults`` need not ask again.
    """

    workspace: str | None = None
    context: str | None = None
    """The kube context to use (explicit, or the descriptor's)."""
    system_namespace: str | None = None
    descriptor: str | None = None
    """Path of ``tau/workspace.connection.yaml``."""
    access: str | None = None
    local: bool | None = None
    """The descriptor declares a local workspace (``access.method: local``)."""
    kubeconfig: str | None = None
    """Path of the connection's isolated kubeconfig."""
    verified: bool | None = None
    namespace: str | None = None
    queue: str | None = None
    service_account: str | None = None
    workspace_uid: str | None = None
    priority_tier: str | None = None
    output_root: str | None = None

    @property
    def pins(self) -> WorkspacePins:
        return WorkspacePins(workspace_uid=self.workspace_uid, namespace=self.namespace, queue=self.queue,
                             service_account=self.service_account)

    def workspace_defaults(self) -> WorkspaceDefaults:
        """The defaults a verified connection already read from its TauWorkspace."""
        return WorkspaceDefaults(namespace=self.namespace, queue=self.queue, service_account=self.service_account,
                                 workspace_uid=self.workspace_uid, priority_tier=self.priority_tier,
                                 output_root=self.output_root)


@cache
def converter() -> cattrs.Converter:
    """Built on first use (cattrs stays out of ``tau --help``)."""
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=False)
    conv.register_structure_hook(str | None, lambda v, _: None if v is None else str(v))
    conv.register_structure_hook(bool | None, lambda v, _: None if v is None else truthy(v))
    return conv


def truthy(value: Any) -> bool:
    """A flag from outside: booleans as they are, ``1/true/yes/on`` (any case) for text."""
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)
