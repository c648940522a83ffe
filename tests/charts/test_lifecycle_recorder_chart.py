"""The lifecycle recorder in the taugrid-core chart: off by default; when on, a watch-only Role, one Recreate
replica running `tau run history record` with its health probes, and fail-closed required values."""

from __future__ import annotations

import pytest

from .conftest import CHARTS

ON = ["-f", str(CHARTS / "taugrid" / "examples" / "services-opt-in.yaml")]


def _named(objects, kind):
    return {o["metadata"]["name"]: o for o in objects if o.get("kind") == kind}


def test_off_by_default(render):
    assert "tau-lifecycle-recorder" not in _named(render(), "Deployment")


def test_on_renders_the_recorder_command_probes_and_watch_only_rbac(render):
    objects = render(*ON)
    deploy = _named(objects, "Deployment")["tau-lifecycle-recorder"]
    assert deploy["metadata"]["namespace"] == "taugrid-default"
    assert deploy["spec"]["replicas"] == 1 and deploy["spec"]["strategy"]["type"] == "Recreate"
    [container] = deploy["spec"]["template"]["spec"]["containers"]
    args = container["args"]
    assert args[:4] == ["run", "history", "record", "--in-cluster"]
    assert {"--namespace=taugrid-default", "--cluster=aks-research", "--health-addr=:8081",
            "--kusto-endpoint=https://adx-research.westeurope.kusto.windows.net", "--kusto-database=Metrics",
            "--kusto-table=TauExpRunLifecycle"} <= set(args)
    assert container["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "health"}
    assert container["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert container["ports"] == [{"name": "health", "containerPort": 8081}]
    role = _named(objects, "Role")["tau-lifecycle-recorder"]
    watched = {(g, r) for rule in role["rules"] for g in rule["apiGroups"] for r in rule["resources"]}
    assert watched == {("batch", "jobs"), ("ray.io", "rayjobs"), ("kueue.x-k8s.io", "workloads"), ("", "pods")}
    assert all(rule["verbs"] == ["get", "list", "watch"] for rule in role["rules"])
    sa = _named(objects, "ServiceAccount")["tau-lifecycle-recorder"]
    assert sa["metadata"]["annotations"]["azure.workload.identity/client-id"]


@pytest.mark.parametrize(("unset", "message"), [
    ("cluster", "taugrid-core.lifecycleRecorder.cluster is required"),
    ("kusto.endpoint", "taugrid-core.lifecycleRecorder.kusto.endpoint is required"),
    ("workloadIdentity.clientId", "taugrid-core.lifecycleRecorder.workloadIdentity.clientId is required"),
])
def test_required_values_fail_rendering(helm, umbrella, unset, message):
    result = helm("template", "taugrid", str(umbrella), "-n", "tau-system", *ON,
                  "--set", f"taugrid-core.lifecycleRecorder.{unset}=", check=False)
    assert result.returncode == 1 and message in result.stderr, result.stderr[-500:]

