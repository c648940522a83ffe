"""``tau cluster install`` driving the real Helm 4 against the simulated cluster."""

from __future__ import annotations

import json
import subprocess
from collections import Counter

import yaml

from tau_testing.charts import helm_env


def helm(helm_bin, cluster, home, *args):
    env = {**helm_env(home), "KUBECONFIG": str(cluster.kubeconfig_path)}
    result = subprocess.run([str(helm_bin), *args], capture_output=True, text=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_dry_run_renders_offline_and_sends_no_request(tau_cli, env_for, live, umbrella, helm_bin, tmp_path):
    env_for(live)
    live.requests.clear()
    result = tau_cli("cluster", "install", "--dry-run", "--chart", str(umbrella))
    assert result.exit_code == 0, result.stderr
    assert live.requests.entries == []
    out = result.stdout
    assert out.startswith("TauGrid installation plan\n")
    assert "  Release:    taugrid" in out and "  Namespace:  tau-system" in out
    assert "TauGrid render summary (nothing was applied)" in out
    assert out.rstrip().endswith("Rendered the TauGrid manifests offline. The cluster was not read or changed.")
    rendered = subprocess.run([str(helm_bin), "template", "taugrid", str(umbrella), "-n", "tau-system",
                               "--include-crds"], capture_output=True, text=True, check=True,
                              env=helm_env(tmp_path)).stdout
    total = len([d for d in yaml.safe_load_all(rendered) if d])
    [total_line] = [line.split() for line in out.splitlines() if line.split()[:1] == ["Total"]]
    assert total_line == ["Total", str(total), "objects"]
    lines = out.split("TauGrid render summary (nothing was applied)\n")[1].splitlines()
    counts = [int(line.split()[1]) for line in lines if line.startswith("  ") and "Total" not in line]
    assert counts == sorted(counts, reverse=True)


def test_dry_run_json_counts_kinds(tau_cli, env_for, umbrella, helm_bin, tmp_path):
    env_for()
    result = tau_cli("cluster", "install", "--dry-run", "--chart", str(umbrella), "-o", "json",
                     "-f", str(umbrella.parents[1] / "charts" / "taugrid" / "examples" / "services-opt-in.yaml"))
    assert result.exit_code == 0, result.stderr
    doc = json.loads(result.stdout)
    rendered = subprocess.run([str(helm_bin), "template", "taugrid", str(umbrella), "-n", "tau-system",
                               "--include-crds", "-f", str(umbrella / "examples" / "services-opt-in.yaml")],
                              capture_output=True, text=True, check=True, env=helm_env(tmp_path)).stdout
    parsed = Counter(d["kind"] for d in yaml.safe_load_all(rendered) if d)
    assert doc["render"]["kinds"] == dict(parsed)  # the fast kind scan agrees with a full YAML parse
    assert doc["plan"]["release"] == "taugrid" and doc["plan"]["dryRun"] is True
    assert doc["render"]["kinds"]["CustomResourceDefinition"] == 3
    assert doc["render"]["kinds"]["ClusterQueue"] == 1
    assert doc["render"]["total"] == sum(doc["render"]["kinds"].values())


def test_fresh_install_runs_two_passes_then_reports_ready(tau_cli, env_for, live, umbrella, helm_bin, tmp_path):
    env_for(live)
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m")
    assert result.exit_code == 0, result.stderr
    assert "Phase 1/2" in result.stderr and "Phase 2/2" in result.stderr
    assert "READY: 8/8 checks passed" in result.stdout
    assert "TauGrid is installed and ready as Helm release taugrid in namespace tau-system." in result.stdout
    history = json.loads(helm(helm_bin, live, tmp_path, "history", "taugrid", "-n", "tau-system", "-o", "json"))
    assert [h["revision"] for h in history] == [1, 2]
    first = json.loads(helm(helm_bin, live, tmp_path, "get", "values", "taugrid", "-n", "tau-system",
                            "--revision", "1", "-o", "json"))
    second = json.loads(helm(helm_bin, live, tmp_path, "get", "values", "taugrid", "-n", "tau-system",
                             "--revision", "2", "-o", "json"))
    assert first == {"baselineQueue": {"enabled": False}}
    assert not second  # --reset-values: the bootstrap override is not replayed
    store = live.store
    assert store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue") is not None
    assert store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "clusters.tau.azure.com")
    assert store.get("v1", "Secret", "tau-system", "sh.helm.release.v1.taugrid.v2") is not None
    controller = store.get("apps/v1", "Deployment", "tau-system", "tau-core-controller")
    assert controller["metadata"]["managedFields"][0]["operation"] == "Apply"  # Helm 4 server-side apply
    validated = tau_cli("cluster", "validate", "installation", "-o", "json", "--timeout", "10s")
    assert validated.exit_code == 0, validated.stderr
    doc = json.loads(validated.stdout)
    assert doc["ready"] is True and (doc["passed"], doc["total"]) == (8, 8)
    assert [c["name"] for c in doc["checks"]] == ["Kubernetes", "Kueue", "KubeRay", "Portal", "Tau controller",
                                                  "TauCluster", "Baseline queue", "Quota guard"]
    assert doc["checks"][7]["detail"] == "ValidatingAdmissionPolicy fails closed and its binding enforces Deny"


def test_upgrade_is_phase_two_only_reapplies_crds_and_keeps_workspaces(tau_cli, env_for, live, umbrella):
    env_for(live)
    assert tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m").exit_code == 0
    live.store.create({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkspace",
                       "metadata": {"name": "research", "namespace": "tau-system"},
                       "spec": {"target": {"namespace": "research"}, "authorization": {"mode": "cluster-wide"}}})
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m",
                     "--set", "baselineQueue.name=batch")
    assert result.exit_code == 0, result.stderr
    assert "Phase 1/2" not in result.stderr and "Phase 2:" in result.stderr
    assert "Updating the TauGrid CRDs from the selected chart" in result.stderr
    crd = live.store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "workspaces.tau.azure.com")
    assert "taugrid-crds" in {m["manager"] for m in crd["metadata"]["managedFields"]}
    assert live.store.get("tau.azure.com/v1alpha1", "TauWorkspace", "tau-system", "research") is not None
    assert live.store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "batch") is not None
    assert live.store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue") is None


def test_quota_guard_is_enforced_by_the_api_server(tau_cli, env_for, live, umbrella):
    """The chart's ValidatingAdmissionPolicy, evaluated by the simulator's VAP engine on real API requests."""
    from tau_testing.sim.client import api_client, expect_api_error, run

    env_for(live)
    assert tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m").exit_code == 0
    live.store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
                       "metadata": {"name": "quota-requester"},
                       "rules": [{"apiGroups": ["tau.azure.com"], "resources": ["quotarequests"],
                                  "verbs": ["create", "update", "get", "patch"]}]})
    live.store.create({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                       "metadata": {"name": "quota-requester-alice"},
                       "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                                   "name": "quota-requester"},
                       "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]})

    def request(name, annotations):
        return {"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauQuotaRequest",
                "metadata": {"name": name, "namespace": "tau-system", "annotations": annotations},
                "spec": {"workspace": "research", "resource": "nvidia.com/gpu", "requested": 8, "reason": "eval"}}

    async def go():
        from kubernetes_asyncio import client

        async with api_client(live, user="alice") as api:
            custom = client.CustomObjectsApi(api)
            args = ("tau.azure.com", "v1alpha1", "tau-system", "quotarequests")
            await custom.create_namespaced_custom_object(*args, request("plain", {}))
            denied = await expect_api_error(custom.create_namespaced_custom_object(
                *args, request("self-approved", {"tau.azure.com/approved": "true"})), 422)
            assert "Only platform administrators may set the quota decision annotations" in denied["message"]
        async with api_client(live, user="admin") as api:
            await client.CustomObjectsApi(api).create_namespaced_custom_object(
                *args, request("approved", {"tau.azure.com/approved": "true", "tau.azure.com/reviewed-by": "ops"}))

    run(go())


def test_namespace_move_is_refused_while_tau_objects_live_elsewhere(tau_cli, env_for, live, umbrella):
    env_for(live)
    assert tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m").exit_code == 0
    live.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "tau-platform"}})
    live.store.create({"apiVersion": "tau.azure.com/v1alpha1", "kind": "TauWorkspace",
                       "metadata": {"name": "legacy", "namespace": "tau-platform"},
                       "spec": {"target": {"namespace": "legacy"}, "authorization": {"mode": "cluster-wide"}}})
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m")
    assert result.exit_code == 1
    assert ("cannot move the TauGrid system namespace to tau-system: Tau system objects still live elsewhere "
            "(workspaces/legacy in tau-platform)") in result.stderr


def test_helm_flags_follow_the_capabilities():
    from tau_cluster.helm import Capabilities
    from tau_cluster.install import upgrade_args
    from tau_cluster.options import InstallOptions

    options = InstallOptions(chart="oci://example/taugrid", atomic=True, values=(), sets=("a=b",))
    helm4 = upgrade_args(options, Capabilities(True, True), bootstrap=False)
    from tau_core import __version__

    assert helm4[:6] == ["upgrade", "--install", "taugrid", "oci://example/taugrid", "--version", __version__]
    assert {"--reset-values", "--rollback-on-failure", "--server-side=true", "--force-conflicts"} <= set(helm4)
    assert "--atomic" not in helm4 and "--wait" not in helm4
    helm3 = upgrade_args(options, Capabilities(False, False), bootstrap=False)
    assert "--atomic" in helm3 and "--server-side=true" not in helm3 and "--force-conflicts" not in helm3
    bootstrap = upgrade_args(options, Capabilities(True, True), bootstrap=True)
    assert "--wait" in bootstrap and "--reset-values" not in bootstrap and "--rollback-on-failure" not in bootstrap
    assert bootstrap[-4:] == ["--set", "a=b", "--set", "baselineQueue.enabled=false"]
