"""The eight readiness checks of a TauGrid installation (``validate installation`` and ``install``).

Each check reads the cluster through :class:`tau_core.kube.KubeSession` and returns PASS, FAIL or SKIP.
Components disabled in the release values are skipped; SKIP counts neither as passed nor in the total.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import attrs

from tau_core.kube import KubeApiError, KubeSession, api_path, condition

PASS, FAIL, SKIP = "PASS", "FAIL", "SKIP"
GUARD = "tau-quota-approval-guard"
GUARD_RULE = {"apiGroups": ["tau.azure.com"], "apiVersions": ["v1alpha1"], "operations": ["CREATE", "UPDATE"],
              "resources": ["quotarequests"]}


@attrs.frozen
class Check:
    name: str
    status: str
    detail: str


@attrs.frozen
class Report:
    checks: tuple[Check, ...]

    @property
    def passed(self) -> int:
        return sum(c.status == PASS for c in self.checks)

    @property
    def total(self) -> int:
        return sum(c.status != SKIP for c in self.checks)

    @property
    def ready(self) -> bool:
        return self.passed == self.total

    def text(self) -> str:
        lines = ["TauGrid installation validation"]
        lines += [f"{c.status:<4} {c.name:<20} {c.detail}" for c in self.checks]
        word = "READY" if self.ready else "NOT READY"
        lines.append(f"{word}: {self.passed}/{self.total} checks passed")
        return "\n".join(lines)

    def document(self) -> dict[str, Any]:
        return {"ready": self.ready, "passed": self.passed, "total": self.total,
                "checks": [attrs.asdict(c) for c in self.checks]}

    def failures(self) -> str:
        return "; ".join(f"{c.name}: {c.detail}" for c in self.checks if c.status == FAIL)


def enabled(values: dict[str, Any] | None, *path: str) -> bool:
    """``values[path...]`` as a toggle; missing values (or unreadable release values) count as enabled."""
    node: Any = values
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return True
        node = node[key]
    return node is not False


def _rolled_out(d: dict[str, Any]) -> tuple[bool, str]:
    spec, status = d.get("spec") or {}, d.get("status") or {}
    desired = int(spec.get("replicas", 1))
    counts = [int(status.get(k) or 0) for k in ("updatedReplicas", "readyReplicas", "availableReplicas")]
    current = int(status.get("observedGeneration") or 0) >= int(d["metadata"].get("generation") or 0)
    ok = current and desired >= 1 and all(c == desired for c in counts)
    name = d["metadata"]["name"]
    if ok:
        return True, f"Deployment {name} rolled out ({desired}/{desired} available)"
    return False, (f"Deployment {name} is not ready (desired={desired} updated={counts[0]} ready={counts[1]} "
                   f"available={counts[2]}); look at its pods and events")


class Checker:
    """Runs the checks for one release against one session."""

    def __init__(self, session: KubeSession, release: str, namespace: str, values: dict[str, Any] | None) -> None:
        self.s, self.release, self.ns, self.values = session, release, namespace, values

    async def run(self) -> Report:
        checks: list[tuple[str, bool, Callable[[], Awaitable[Check]]]] = [
            ("Kubernetes", True, self.kubernetes),
            ("Kueue", enabled(self.values, "components", "kueue", "enabled"), lambda: self.chart_deployment(
                "Kueue", "kueue-")),
            ("KubeRay", enabled(self.values, "components", "kuberayOperator", "enabled"),
             lambda: self.chart_deployment("KubeRay", "kuberay-operator-")),
            ("Portal", enabled(self.values, "components", "taugridCore", "enabled")
             and enabled(self.values, "taugrid-core", "portal", "enabled"), self.portal),
            ("Tau controller", enabled(self.values, "components", "tauCoreController", "enabled"), self.controller),
            ("TauCluster", enabled(self.values, "components", "tauCoreController", "enabled"), self.taucluster),
            ("Baseline queue", True, self.baseline_queue),
            ("Quota guard", enabled(self.values, "components", "tauCoreController", "enabled"), self.quota_guard),
        ]
        results = []
        for name, wanted, check in checks:
            if not wanted:
                results.append(Check(name, SKIP, "disabled in the release values"))
                continue
            try:
                results.append(await check())
            except KubeApiError as exc:
                results.append(Check(name, FAIL, f"cannot read it: {exc.message}"))
        return Report(tuple(results))

    async def kubernetes(self) -> Check:
        info = await self.s.get("/version") or {}
        version = str(info.get("gitVersion", "unknown"))
        try:
            major, minor = int(info.get("major", "0")), int(str(info.get("minor", "0")).rstrip("+"))
        except ValueError:
            major = minor = 0
        if (major, minor) >= (1, 30):
            return Check("Kubernetes", PASS, f"{version} (supported)")
        return Check("Kubernetes", FAIL, f"{version} is not supported; upgrade the cluster to Kubernetes 1.30 or newer")

    async def _release_deployments(self, extra: str = "") -> list[dict[str, Any]]:
        selector = f"app.kubernetes.io/instance={self.release}" + (f",{extra}" if extra else "")
        return await self.s.list_items(api_path("apps/v1", "deployments", namespace=self.ns),
                                       label_selector=selector)

    async def chart_deployment(self, name: str, prefix: str) -> Check:
        found = [d for d in await self._release_deployments()
                 if str((d["metadata"].get("labels") or {}).get("helm.sh/chart", "")).startswith(prefix)]
        if len(found) != 1:
            return Check(name, FAIL, f"expected one Deployment of chart {prefix}* for release {self.release} in "
                                     f"{self.ns}, found {len(found)}")
        ok, detail = _rolled_out(found[0])
        return Check(name, PASS if ok else FAIL, detail)

    async def portal(self) -> Check:
        found = await self._release_deployments("app.kubernetes.io/component=portal")
        if len(found) != 1:
            return Check("Portal", FAIL, f"expected one Portal Deployment in {self.ns}, found {len(found)}")
        ok, detail = _rolled_out(found[0])
        return Check("Portal", PASS if ok else FAIL, detail)

    async def controller(self) -> Check:
        d = await self.s.get(api_path("apps/v1", "deployments", namespace=self.ns, name="tau-core-controller"),
                             missing_ok=True)
        if d is None:
            return Check("Tau controller", FAIL, f"Deployment tau-core-controller not found in {self.ns}")
        ok, detail = _rolled_out(d)
        return Check("Tau controller", PASS if ok else FAIL, detail)

    async def taucluster(self) -> Check:
        tc = await self.s.get(api_path("tau.azure.com/v1alpha1", "clusters", name="cluster"), missing_ok=True)
        if tc is None:
            return Check("TauCluster", FAIL, "TauCluster cluster does not exist")
        generation = int(tc["metadata"].get("generation") or 0)
        status = tc.get("status") or {}
        if int(status.get("observedGeneration") or 0) < generation:
            return Check("TauCluster", FAIL, f"generation {generation} not yet observed by the controller")
        if status.get("phase") == "Degraded":
            return Check("TauCluster", FAIL, "phase is Degraded; see kubectl describe clusters.tau.azure.com cluster")
        nodes = condition(tc, "NodesReady")
        if not nodes or int(nodes.get("observedGeneration") or generation) < generation:
            return Check("TauCluster", FAIL, "NodesReady is not reported for the current generation")
        if nodes.get("status") != "True":
            return Check("TauCluster", FAIL, f"NodesReady={nodes.get('status')}: {nodes.get('message', '')}".strip())
        return Check("TauCluster", PASS, f"generation {generation} observed; NodesReady=True")

    async def baseline_queue(self) -> Check:
        selector = f"app.kubernetes.io/instance={self.release},app.kubernetes.io/part-of=taugrid"
        queues = await self.s.list_items(api_path("kueue.x-k8s.io/v1beta2", "clusterqueues"),
                                         label_selector=selector)
        if len(queues) != 1:
            return Check("Baseline queue", FAIL, f"expected one ClusterQueue of release {self.release}, "
                                                 f"found {len(queues)}")
        name = queues[0]["metadata"]["name"]
        active = condition(queues[0], "Active")
        if not active or active.get("status") != "True":
            reason = (active or {}).get("message") or "no Active condition yet"
            return Check("Baseline queue", FAIL, f"ClusterQueue {name} is not active: {reason}")
        return Check("Baseline queue", PASS, f"ClusterQueue {name} is active")

    async def quota_guard(self) -> Check:
        group = "admissionregistration.k8s.io/v1"
        policy = await self.s.get(api_path(group, "validatingadmissionpolicies", name=GUARD), missing_ok=True)
        binding = await self.s.get(api_path(group, "validatingadmissionpolicybindings", name=GUARD), missing_ok=True)
        if policy is None or binding is None:
            return Check("Quota guard", FAIL, f"ValidatingAdmissionPolicy or binding {GUARD} is missing")
        spec = policy.get("spec") or {}
        rules = (spec.get("matchConstraints") or {}).get("resourceRules") or []
        if spec.get("failurePolicy") != "Fail" or [_rule(r) for r in rules] != [GUARD_RULE]:
            return Check("Quota guard", FAIL, f"{GUARD} does not fail closed on quotarequests CREATE/UPDATE")
        if (binding.get("spec") or {}).get("validationActions") != ["Deny"]:
            return Check("Quota guard", FAIL, f"binding {GUARD} does not enforce Deny")
        return Check("Quota guard", PASS, "ValidatingAdmissionPolicy fails closed and its binding enforces Deny")


def _rule(rule: dict[str, Any]) -> dict[str, Any]:
    return {k: rule.get(k) for k in GUARD_RULE}
