"""``tau serve status``: one row per service, phases and hints for ``--watch``.

A refresh costs one GET of the workload, plus one pod list only while the service is not ready (the
hints: pending Kueue admission, image pulls, an unhealthy Serve application), so at most two requests.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import attrs

from tau_core import keys
from tau_core.kube import KubeSession, api_path, label_selector

RAYSERVICE_COLUMNS = ("NAME", "STATUS", "READY", "AGE")
DEPLOYMENT_COLUMNS = ("NAME", "READY", "DESIRED", "AVAILABLE", "AGE")
PULL_REASONS = ("ErrImagePull", "ImagePullBackOff", "InvalidImageName")


@attrs.frozen(kw_only=True)
class ServeStatus:
    """What ``status`` shows (``-o json`` prints it as is)."""

    name: str
    kind: str
    namespace: str
    phase: str
    ready: bool
    status: str = ""
    endpoints: int = 0
    replicas: int | None = None
    desired: int = 0
    ready_replicas: int = 0
    available: int = 0
    created: str = ""
    hints: tuple[str, ...] = ()

    def row(self, now: datetime | None = None) -> tuple[str, ...]:
        age = _age(self.created, now)
        if self.kind == "RayService":
            return (self.name, self.status or self.phase, str(self.endpoints), age)
        return (self.name, f"{self.ready_replicas}/{self.desired}", str(self.desired), str(self.available), age)


def _age(created: str, now: datetime | None) -> str:
    if not created:
        return "<unknown>"
    start = datetime.fromisoformat(created.replace("Z", "+00:00"))
    seconds = max(0, int(((now or datetime.now(UTC)) - start).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def rayservice_status(obj: Mapping[str, Any]) -> ServeStatus:
    from tau_serve.renderers.rayservice import load_serve_config

    meta, status = obj.get("metadata") or {}, obj.get("status") or {}
    apps = ((status.get("activeServiceStatus") or {}).get("applicationStatuses")) or {}
    unhealthy = [f"{app} is {(s or {}).get('status')}" for app, s in apps.items()
                 if (s or {}).get("status") not in ("RUNNING", None)]
    ready_cond = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    ready = ready_cond and not unhealthy and int(status.get("numServeEndpoints") or 0) > 0
    config = load_serve_config(str((obj.get("spec") or {}).get("serveConfigV2") or ""))
    replicas = None
    for app in config.get("applications") or []:
        for dep in app.get("deployments") or []:
            if "num_replicas" in dep:
                replicas = int(dep["num_replicas"])
    phase = "Ready" if ready else ("Unhealthy" if unhealthy else ("Starting" if status else "Pending"))
    hints = tuple(f"unhealthy Serve application: {u}" for u in unhealthy)
    return ServeStatus(name=str(meta.get("name")), kind="RayService", namespace=str(meta.get("namespace")),
                       phase=phase, ready=ready, status=str(status.get("serviceStatus") or phase),
                       endpoints=int(status.get("numServeEndpoints") or 0), replicas=replicas,
                       created=str(meta.get("creationTimestamp") or ""), hints=hints)


def deployment_status(obj: Mapping[str, Any]) -> ServeStatus:
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    desired = int(spec["replicas"]) if spec.get("replicas") is not None else 1
    ready_n = int(status.get("readyReplicas") or 0)
    current = int(status.get("observedGeneration") or 0) >= int(meta.get("generation") or 0)
    ready = current and ready_n >= desired and int(status.get("updatedReplicas") or 0) >= desired
    phase = "Ready" if ready else ("ScaledToZero" if desired == 0 else "Progressing")
    return ServeStatus(name=str(meta.get("name")), kind="Deployment", namespace=str(meta.get("namespace")),
                       phase=phase, ready=ready, desired=desired, ready_replicas=ready_n, replicas=desired,
                       available=int(status.get("availableReplicas") or 0),
                       created=str(meta.get("creationTimestamp") or ""))


def pod_hints(pods: list[dict[str, Any]]) -> tuple[str, ...]:
    """Why pods are not serving yet: Kueue admission, image pulls, crashes."""
    hints: list[str] = []
    for pod in pods:
        name = (pod.get("metadata") or {}).get("name")
        gates = [g.get("name") for g in (pod.get("spec") or {}).get("schedulingGates") or []]
        if any("kueue" in str(g) for g in gates):
            queue = ((pod.get("metadata") or {}).get("labels") or {}).get(keys.KUEUE_QUEUE_NAME, "")
            hints.append(f"pending admission: pod {name} waits for Kueue to admit it (LocalQueue {queue}); "
                         "see the queue with kubectl get workloads")
            continue
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            waiting = (cs.get("state") or {}).get("waiting") or {}
            if waiting.get("reason") in PULL_REASONS:
                hints.append(f"image pull: pod {name} cannot pull {cs.get('image')} ({waiting.get('reason')}); "
                             "check the image name, digest and registry access")
            elif waiting.get("reason") == "CrashLoopBackOff":
                hints.append(f"container {cs.get('name')} of pod {name} keeps crashing; read its logs")
    return tuple(dict.fromkeys(hints))


async def read_status(session: KubeSession, kind: str, namespace: str, name: str) -> ServeStatus | None:
    from tau_serve import cluster

    obj = await cluster.get(session, kind, namespace, name)
    if obj is None:
        return None
    result = rayservice_status(obj) if kind == "RayService" else deployment_status(obj)
    if result.ready:
        return result
    selector = {keys.SERVICE: name} if kind == "RayService" else {"app": name}
    pods = await session.list_items(api_path("v1", "pods", namespace=namespace),
                                    label_selector=label_selector(selector))
    return attrs.evolve(result, hints=result.hints + pod_hints(pods))


def monotonic() -> float:
    return time.monotonic()
