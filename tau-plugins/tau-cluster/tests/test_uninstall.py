"""``tau cluster uninstall``: confirmation, the queue drain before the release goes, guidance, dry run."""

from __future__ import annotations

import json


def install(tau_cli, env_for, live, umbrella, *extra):
    env_for(live)
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m", *extra)
    assert result.exit_code == 0, result.stderr


def test_uninstall_needs_yes(tau_cli, env_for):
    env_for()
    result = tau_cli("cluster", "uninstall")
    assert result.exit_code == 1
    assert "uninstall removes the TauGrid control plane; rerun with --yes" in result.stderr


def test_queue_policy_is_drained_while_kueue_still_runs(tau_cli, env_for, live, umbrella):
    install(tau_cli, env_for, live, umbrella)
    dry = tau_cli("cluster", "uninstall", "--dry-run", "--chart", str(umbrella))
    assert dry.exit_code == 0, dry.stderr
    assert "TauGrid Helm uninstall dry run finished; nothing in the cluster was changed." in dry.stdout
    assert live.store.get("kueue.x-k8s.io/v1beta2", "ClusterQueue", None, "jobqueue") is not None
    assert live.store.get("apps/v1", "Deployment", "tau-system", "tau-core-controller") is not None
    order: list[tuple[str, str, bool]] = []

    def record(event: str, obj: dict) -> None:
        if event == "DELETED" and obj["kind"] in ("ClusterQueue", "ResourceFlavor", "Topology", "Deployment"):
            kueue = live.store.get("apps/v1", "Deployment", "tau-system", "kueue-controller-manager")
            order.append((obj["kind"], obj["metadata"]["name"], kueue is not None))

    unsubscribe = live.store.subscribe(record)
    try:
        result = tau_cli("cluster", "uninstall", "--yes", "--chart", str(umbrella), "--timeout", "1m")
    finally:
        unsubscribe()
    assert result.exit_code == 0, result.stderr
    assert ("Removed the queue policy (clusterqueue/jobqueue, resourceflavor/taugrid-default-cpu, "
            "topology/default-node-topology) while Kueue was still running.") in result.stderr
    assert result.stdout.startswith("TauGrid Helm release removed.")
    queue_deletions = [i for i, (kind, _, _) in enumerate(order) if kind != "Deployment"]
    kueue_deleted = [i for i, (_, name, _) in enumerate(order) if name == "kueue-controller-manager"]
    assert queue_deletions and kueue_deleted and max(queue_deletions) < kueue_deleted[0]
    assert all(kueue_alive for kind, _, kueue_alive in order if kind != "Deployment")
    assert live.store.get("apps/v1", "Deployment", "tau-system", "tau-core-controller") is None
    assert live.store.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", None, "clusters.tau.azure.com")


def test_mismatched_chart_skips_the_drain_and_failed_removal_prints_guidance(tau_cli, env_for, live, umbrella,
                                                                             tmp_path):
    install(tau_cli, env_for, live, umbrella)
    other = tmp_path / "charts" / "other-chart"
    other.mkdir(parents=True)
    live.faults.add(method="DELETE", path_regex="/deployments/tau-core-controller$", status=500, count=50)
    result = tau_cli("cluster", "uninstall", "--yes", "--chart", str(other), "--timeout", "20s", "--no-wait")
    assert result.exit_code == 1
    assert "was installed from chart 'taugrid' but --chart names 'other-chart'; skipping the queue drain" \
        in result.stderr
    assert "The queue policy was not drained" in result.stderr
    assert "kubectl patch clusterqueues/jobqueue resourceflavors/taugrid-default-cpu" in result.stderr
    assert "error: helm uninstall failed" in result.stderr


def test_validate_skips_components_disabled_in_the_release(tau_cli, env_for, live, umbrella):
    from tau_testing.paths import repo_root

    example = repo_root() / "deploy" / "charts" / "taugrid" / "examples" / "queue-only.yaml"
    install(tau_cli, env_for, live, umbrella, "-f", str(example))
    doc = json.loads(tau_cli("cluster", "validate", "installation", "-o", "json", "--timeout", "5s").stdout)
    statuses = {c["name"]: c["status"] for c in doc["checks"]}
    assert statuses == {"Kubernetes": "PASS", "Kueue": "PASS", "KubeRay": "SKIP", "Portal": "SKIP",
                        "Tau controller": "SKIP", "TauCluster": "SKIP", "Baseline queue": "PASS",
                        "Quota guard": "SKIP"}
    assert (doc["passed"], doc["total"]) == (3, 3)
    text = tau_cli("cluster", "validate", "installation", "--timeout", "5s").stdout
    assert "SKIP KubeRay              disabled in the release values" in text
    assert text.rstrip().endswith("READY: 3/3 checks passed")
