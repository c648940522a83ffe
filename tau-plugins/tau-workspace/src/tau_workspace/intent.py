"""The TauWorkspace an operator verb asks for, and how it compares with one that exists.

:class:`WorkspaceIntent` is the typed request (``create`` renders ``workspace-rbac``, ``adopt`` renders
``cluster-wide``); :meth:`WorkspaceIntent.manifest` is the object sent to the API server.  Two intents
are compatible when their specs are equal after the CRD's defaults are applied to the live one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from tau_core import keys

ROLE = "tau-researcher-v1"
DEFAULT_QUEUE = "jobqueue"
DEFAULT_NAME = "taugrid-default"


@attrs.frozen
class Principal:
    """Who the ``workspace-rbac`` binding names: the external group/team and the Kubernetes subject."""

    provider: str
    name: str
    subject_kind: str
    subject_name: str


@attrs.frozen
class WorkloadIdentity:
    service_account: str
    client_id: str


@attrs.frozen
class WorkspaceIntent:
    name: str
    system_namespace: str
    namespace: str
    queue: str
    output_root: str
    priority: str
    create_namespace: bool
    principal: Principal | None = None  # None: cluster-wide authorization
    workload_identity: WorkloadIdentity | None = None

    @property
    def mode(self) -> str:
        return "workspace-rbac" if self.principal is not None else "cluster-wide"

    def spec(self) -> dict[str, Any]:
        spec: dict[str, Any] = {"authorization": {"mode": self.mode}}
        if self.principal is not None:
            spec["principalRef"] = {"provider": self.principal.provider, "name": self.principal.name}
            spec["kubernetesSubject"] = {"kind": self.principal.subject_kind, "name": self.principal.subject_name}
            spec["role"] = ROLE
        spec["target"] = {"namespace": self.namespace, "createNamespace": self.create_namespace}
        spec["queue"] = self.queue
        spec["defaults"] = {"outputRoot": self.output_root, "priority": self.priority}
        if self.workload_identity is not None:
            spec["workloadIdentity"] = {"serviceAccountName": self.workload_identity.service_account,
                                        "clientId": self.workload_identity.client_id}
        return spec

    def manifest(self) -> dict[str, Any]:
        return {"apiVersion": keys.API_VERSION, "kind": "TauWorkspace",
                "metadata": {"name": self.name, "namespace": self.system_namespace},
                "spec": self.spec()}


def _normalized(spec: Mapping[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in spec.items() if v not in (None, {}, "")}
    out["authorization"] = {"mode": "workspace-rbac", **dict(spec.get("authorization") or {})}
    target = dict(spec.get("target") or {})
    target.setdefault("createNamespace", False)
    out["target"] = target
    return out


def compatible(intent: WorkspaceIntent, existing: Mapping[str, Any]) -> bool:
    """Does the live object ``existing`` already say what ``intent`` asks for?"""
    meta = existing.get("metadata") or {}
    if meta.get("name") != intent.name:
        return False
    return _normalized(existing.get("spec") or {}) == _normalized(intent.spec())
