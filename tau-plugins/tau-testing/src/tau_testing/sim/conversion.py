"""Conversion between the served versions of a custom resource.

Kubernetes converts every read and write between the requested version and the storage version. Kueue's
``v1beta1`` and ``v1beta2`` differ in a few renamed or moved fields, converted here as Kueue's conversion webhook
does (fields that exist in one version only are dropped). Other groups (KubeRay ``v1alpha1``/``v1``, CRDs
created in tests) have no converter: only ``apiVersion`` changes, as with ``conversion.strategy: None``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

Converter = Callable[[dict[str, Any]], None]

_PRIORITY_SOURCES = {
    "kueue.x-k8s.io/workloadpriorityclass": ("kueue.x-k8s.io", "WorkloadPriorityClass"),
    "scheduling.k8s.io/priorityclass": ("scheduling.k8s.io", "PriorityClass"),
}


def _move(container: dict[str, Any] | None, old: str, new: str) -> None:
    if isinstance(container, dict) and old in container:
        value = container.pop(old)
        container.setdefault(new, value)


def _drop(container: dict[str, Any] | None, *names: str) -> None:
    if isinstance(container, dict):
        for name in names:
            container.pop(name, None)


def _cq_up(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    _move(spec, "cohort", "cohortName")
    if isinstance(spec, dict) and "admissionChecks" in spec:
        names = spec.pop("admissionChecks") or []
        strategy = spec.setdefault("admissionChecksStrategy", {})
        strategy.setdefault("admissionChecks", [{"name": n} for n in names])
    _drop(obj.get("status"), "pendingWorkloadsStatus")
    _drop((obj.get("status") or {}).get("fairSharing"), "admissionFairSharingStatus")


def _cq_down(obj: dict[str, Any]) -> None:
    _move(obj.get("spec"), "cohortName", "cohort")
    _drop(obj.get("spec"), "concurrentAdmissionPolicy")


def _lq_up(obj: dict[str, Any]) -> None:
    _move(obj.get("status"), "flavorUsage", "flavorsUsage")
    _drop(obj.get("status"), "flavors")


def _lq_down(obj: dict[str, Any]) -> None:
    _move(obj.get("status"), "flavorsUsage", "flavorUsage")


def _wl_up(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and "priorityClassName" in spec:
        name = spec.pop("priorityClassName")
        source = spec.pop("priorityClassSource", "")
        group, kind = _PRIORITY_SOURCES.get(source, ("", ""))
        if name and group:
            spec.setdefault("priorityClassRef", {"group": group, "kind": kind, "name": name})
    _drop(spec, "priorityClassSource")
    _move(obj.get("status"), "accumulatedPastExexcutionTimeSeconds", "accumulatedPastExecutionTimeSeconds")


def _wl_down(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("priorityClassRef"), dict):
        ref = spec.pop("priorityClassRef")
        for source, (group, kind) in _PRIORITY_SOURCES.items():
            if (ref.get("group"), ref.get("kind")) == (group, kind):
                spec.setdefault("priorityClassName", ref.get("name"))
                spec.setdefault("priorityClassSource", source)
    _drop(spec, "preemptionGates")
    _drop(obj.get("status"), "preemptionGates")
    _move(obj.get("status"), "accumulatedPastExecutionTimeSeconds", "accumulatedPastExexcutionTimeSeconds")


def _mkc_up(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict):
        source = {k: spec.pop(k) for k in ("kubeConfig", "clusterProfileRef") if k in spec}
        if source:
            spec.setdefault("clusterSource", source)


def _mkc_down(obj: dict[str, Any]) -> None:
    spec = obj.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("clusterSource"), dict):
        for key, value in spec.pop("clusterSource").items():
            spec.setdefault(key, value)


def _ac_up(obj: dict[str, Any]) -> None:
    _drop(obj.get("spec"), "retryDelayMinutes")


def _cohort_up(obj: dict[str, Any]) -> None:
    _drop((obj.get("status") or {}).get("fairSharing"), "admissionFairSharingStatus")


def _mkconfig_down(obj: dict[str, Any]) -> None:
    _drop(obj.get("spec"), "quotaManagement")


def _nothing(obj: dict[str, Any]) -> None:
    return None


# (group, kind) -> {(from, to): converter}
CONVERTERS: dict[tuple[str, str], dict[tuple[str, str], Converter]] = {
    ("kueue.x-k8s.io", "ClusterQueue"): {("v1beta1", "v1beta2"): _cq_up, ("v1beta2", "v1beta1"): _cq_down},
    ("kueue.x-k8s.io", "LocalQueue"): {("v1beta1", "v1beta2"): _lq_up, ("v1beta2", "v1beta1"): _lq_down},
    ("kueue.x-k8s.io", "Workload"): {("v1beta1", "v1beta2"): _wl_up, ("v1beta2", "v1beta1"): _wl_down},
    ("kueue.x-k8s.io", "MultiKueueCluster"): {("v1beta1", "v1beta2"): _mkc_up, ("v1beta2", "v1beta1"): _mkc_down},
    ("kueue.x-k8s.io", "AdmissionCheck"): {("v1beta1", "v1beta2"): _ac_up, ("v1beta2", "v1beta1"): _nothing},
    ("kueue.x-k8s.io", "Cohort"): {("v1beta1", "v1beta2"): _cohort_up, ("v1beta2", "v1beta1"): _nothing},
    ("kueue.x-k8s.io", "MultiKueueConfig"): {("v1beta1", "v1beta2"): _nothing,
                                             ("v1beta2", "v1beta1"): _mkconfig_down},
}


def convert(obj: dict[str, Any], group: str, kind: str, to_version: str) -> dict[str, Any]:
    """Convert ``obj`` (modified in place and returned) to ``to_version`` of its group."""
    from_version = str(obj.get("apiVersion", "")).rpartition("/")[2]
    if from_version != to_version:
        converter = CONVERTERS.get((group, kind), {}).get((from_version, to_version))
        if converter is not None:
            converter(obj)
    obj["apiVersion"] = f"{group}/{to_version}" if group else to_version
    return obj
