"""TauQuotaRequest reconciler and the tau-quota-approval-guard ValidatingAdmissionPolicy, in the simulator."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from ctrl_platform import workspace

from tau_core import keys
from tau_core.kube import KubeApiError, KubeSession, run

pytestmark = pytest.mark.realclock  # the controller runs in real time

REPO = Path(__file__).resolve().parents[2]
TAU = keys.API_VERSION
SYSNS = "tau-system"


def _request(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {"apiVersion": TAU, "kind": "TauQuotaRequest",
            "metadata": {"name": name, "namespace": SYSNS, "annotations": annotations or {}},
            "spec": {"workspace": "aurora", "resource": "h200", "requested": 32,
                     "reason": "train-70b-checkpoint-sweep", "mutationMode": "ReportOnly"}}


def _as(cluster: Any, tmp_path: Path, user: str, fn: Any) -> Any:
    path = cluster.write_kubeconfig(tmp_path / f"{user}.kubeconfig", user=user)

    async def go() -> Any:
        async with await KubeSession.connect(kubeconfig=str(path)) as session:
            return await fn(session)

    return run(go)


def _status(cluster: Any, name: str) -> dict[str, Any]:
    return (cluster.store.get(TAU, "TauQuotaRequest", SYSNS, name) or {}).get("status") or {}


@pytest.fixture
def guarded(platform: Any, controller: Any) -> Any:
    for doc in yaml.safe_load_all((REPO / "deploy" / "admission" / "tau-quota-approval-guard.yaml").read_text()):
        platform.store.create(doc)
    platform.store.create(workspace())
    platform.wait_for(lambda: ((platform.store.get(TAU, "TauWorkspace", SYSNS, "aurora") or {}).get("status") or {})
                      .get("phase") == "Ready", timeout=20)
    return platform


def test_request_is_pending_then_approved_by_a_platform_admin(guarded, tmp_path):
    path = f"/apis/{TAU}/namespaces/{SYSNS}/quotarequests"
    # the researcher may create requests through the reader Role the workspace grants
    _as(guarded, tmp_path, "researcher", lambda s: s.create(path, _request("burst")))
    guarded.wait_for(lambda: _status(guarded, "burst").get("phase") == "PendingApproval", timeout=20)
    assert _status(guarded, "burst")["decision"] == "waiting for platform approval"

    patch = {"metadata": {"annotations": {keys.QUOTA_APPROVED: "true", keys.QUOTA_REVIEWED_BY: "ops@contoso"}}}
    _as(guarded, tmp_path, "admin", lambda s: s.patch(f"{path}/burst", patch))
    guarded.wait_for(lambda: _status(guarded, "burst").get("phase") == "Approved", timeout=20)
    status = _status(guarded, "burst")
    assert status["approvedBy"] == "ops@contoso"
    assert status["decision"] == "approved in ReportOnly mode; waiting for GitOps quota update"
    by_type = {c["type"]: c for c in status["conditions"]}
    assert (by_type["Approved"]["status"], by_type["QuotaMutated"]["reason"]) == ("True", "ReportOnly")
    assert guarded.store.get(TAU, "TauQuotaRequest", SYSNS, "burst")["spec"]["requested"] == 32  # never mutated


def test_rejection_wins_over_approval(guarded, tmp_path):
    guarded.store.create(_request("both", {keys.QUOTA_APPROVED: "true", keys.QUOTA_REJECTED: "true"}))
    guarded.wait_for(lambda: _status(guarded, "both").get("phase") == "Rejected", timeout=20)
    assert _status(guarded, "both")["decision"] == "request rejected by platform"


def test_guard_denies_a_researcher_setting_decision_annotations(guarded, tmp_path):
    path = f"/apis/{TAU}/namespaces/{SYSNS}/quotarequests"
    with pytest.raises(KubeApiError) as denied:
        _as(guarded, tmp_path, "researcher",
            lambda s: s.create(path, _request("self-approved", {keys.QUOTA_APPROVED: "true"})))
    assert "TauQuotaRequest quota decision annotations are platform-owned." in str(denied.value)
    assert guarded.store.get(TAU, "TauQuotaRequest", SYSNS, "self-approved") is None
