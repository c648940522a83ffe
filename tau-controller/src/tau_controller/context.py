"""What every reconciler gets: the API client, the system namespace and an Event recorder."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from tau_controller.api import EVENT, Client
from tau_controller.conditions import now

log = logging.getLogger("tau_controller")
COMPONENT = "tau-core-controller"


class ReconcileError(Exception):
    """A reconcile step failed in a way that is retried with backoff (the message is logged)."""


@dataclass
class Ctx:
    client: Client
    system_namespace: str = "tau-system"
    #: recent Events, for tests and debugging (bounded)
    events: list[dict[str, Any]] = field(default_factory=list)
    #: state reconcilers keep between runs (e.g. when a failure was first seen); lost on restart by design
    memo: dict[str, Any] = field(default_factory=dict)
    #: this controller resubmits runs stamped ``retry-owner: controller`` (advertised in TauCluster status)
    server_side_retry: bool = False
    #: namespaces this controller watches (empty: every namespace)
    namespaces: tuple[str, ...] = ()
    #: this process (an Event's ``reportingInstance`` says which process recorded it)
    instance: str = field(default_factory=lambda: f"{COMPONENT}-{uuid.uuid4().hex[:10]}")
    #: uids of failed workloads this process deleted (or sent a DELETE whose outcome is unknown) to resubmit them
    deleted: set[str] = field(default_factory=set)

    async def event(self, obj: Mapping[str, Any], reason: str, message: str, type_: str = "Normal") -> None:
        """Record a core/v1 Event about ``obj`` (best effort: a failure is logged, never raised)."""
        meta = obj.get("metadata") or {}
        namespace = meta.get("namespace") or self.system_namespace
        stamp = now()
        body = {
            "apiVersion": "v1", "kind": "Event",
            "metadata": {"name": f"{meta.get('name')}.{uuid.uuid4().hex[:12]}", "namespace": namespace},
            "involvedObject": {"apiVersion": obj.get("apiVersion"), "kind": obj.get("kind"),
                               "name": meta.get("name"), "namespace": meta.get("namespace"), "uid": meta.get("uid")},
            "reason": reason, "message": message, "type": type_, "count": 1,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "source": {"component": COMPONENT},
            "reportingComponent": COMPONENT,
        }
        self.events.append(body)
        del self.events[:-200]
        try:
            await self.client.session.create(EVENT.path(namespace), body)
        except Exception as exc:
            log.warning("could not record event %s on %s/%s: %s", reason, namespace, meta.get("name"), exc)
