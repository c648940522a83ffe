"""The product's own CRDs (deploy/crds): served by the simulator, validated by their schemas."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tau_testing.sim import ApiError, SimCluster
from tau_testing.sim.scenarios.taugrid import tau_crds_dir

KINDS = {"TauCluster": ("clusters", "Cluster", ["Mode", "Phase", "Age"]),
         "TauWorkspace": ("workspaces", "Namespaced", ["Phase", "Namespace", "Queue", "Age"]),
         "TauQuotaRequest": ("quotarequests", "Namespaced", ["Workspace", "Resource", "Requested", "Phase", "Age"])}


def _crds() -> dict[str, dict]:  # type: ignore[type-arg]
    out = {}
    for path in sorted(Path(tau_crds_dir()).glob("*.yaml")):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == "CustomResourceDefinition":
            out[doc["spec"]["names"]["kind"]] = doc
    return out


def test_three_crds_with_status_subresource_and_printer_columns() -> None:
    crds = _crds()
    assert set(crds) == set(KINDS)
    for kind, (plural, scope, columns) in KINDS.items():
        spec = crds[kind]["spec"]
        assert spec["group"] == "tau.azure.com"
        assert spec["names"]["plural"] == plural
        assert spec["scope"] == scope
        (version,) = spec["versions"]
        assert version["name"] == "v1alpha1" and version["served"] and version["storage"]
        assert version["subresources"] == {"status": {}}
        assert [c["name"] for c in version["additionalPrinterColumns"]] == columns
        schema = version["schema"]["openAPIV3Schema"]
        assert {"spec", "status"} <= set(schema["properties"])


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    c = SimCluster()
    c.preload_crds(tau_crds_dir())
    c.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tau-system"}})
    yield c


def _quota(requested: object, **extra: object) -> dict:  # type: ignore[type-arg]
    spec = {"workspace": "aurora", "resource": "h200", "requested": requested, "reason": "sweep", **extra}
    return {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauQuotaRequest",
            "metadata": {"name": f"q-{abs(hash(str(spec))) % 10**6}", "namespace": "tau-system"}, "spec": spec}


def test_valid_objects_are_accepted(cluster) -> None:  # type: ignore[no-untyped-def]
    created = cluster.store.create(_quota(32, mutationMode="ReportOnly"))
    assert created["spec"]["requested"] == 32
    tc = cluster.store.create({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauCluster",
                               "metadata": {"name": "cluster"}, "spec": {}})
    assert tc["metadata"]["name"] == "cluster"


@pytest.mark.parametrize("bad", [_quota(0), _quota(5, mutationMode="Apply"), _quota("many")])
def test_schema_rejects_invalid_quota_requests(cluster, bad) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ApiError) as err:
        cluster.store.create(bad)
    assert err.value.code == 422


def test_workspace_schema_rejects_bad_enum_and_ttl(cluster) -> None:  # type: ignore[no-untyped-def]
    base = {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkspace",
            "metadata": {"name": "w1", "namespace": "tau-system"},
            "spec": {"role": "tau-researcher-v1", "principalRef": {"provider": "entra", "name": "g"},
                     "kubernetesSubject": {"kind": "Group", "name": "g"}}}
    assert cluster.store.create(base)["spec"]["role"] == "tau-researcher-v1"
    for spec_patch in ({"role": "admin"}, {"defaults": {"ttlSecondsAfterFinished": 5}},
                       {"kubernetesSubject": {"kind": "Robot", "name": "g"}}):
        obj = {**base, "metadata": {"name": "w2", "namespace": "tau-system"}, "spec": {**base["spec"], **spec_patch}}
        with pytest.raises(ApiError) as err:
            cluster.store.create(obj)
        assert err.value.code == 422
