"""``profiles export`` (fail closed, atomic, read back by tau_core) and the generated values reference."""

from __future__ import annotations

import json
import stat

import pytest

from tau_cluster.explain import packaged_reference, render_markdown
from tau_cluster.profiles import build_snapshot
from tau_core.config.profiles import load_snapshot
from tau_core.errors import TauError
from tau_testing.paths import repo_root


def installed(tau_cli, env_for, live, umbrella):
    env_for(live)
    assert tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "2m").exit_code == 0
    return live.store.get("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")


def test_export_round_trips_and_refuses_untrusted_status(tau_cli, env_for, live, umbrella, tmp_path):
    installed(tau_cli, env_for, live, umbrella)
    target = tmp_path / "profiles.yaml"
    result = tau_cli("cluster", "profiles", "export", "-o", str(target))
    assert result.exit_code == 0, result.stderr
    assert stat.S_IMODE(target.stat().st_mode) == 0o644
    assert [p.name for p in tmp_path.iterdir()] == ["profiles.yaml"]  # no temp file left behind
    catalog = load_snapshot(target)
    assert catalog.generation == 1 and len(catalog.profiles) == 17
    serving = {p.name: p for p in catalog.typed() if "serving" in p.lanes}
    assert sorted(serving) == ["azure.research.serving.2node", "azure.research.serving.gpu"]
    from tau_core.workspace.profiles import multinode_rayservice

    assert multinode_rayservice(serving["azure.research.serving.2node"], 2).allowed  # the chart's multi-node one
    assert "placement independent" in multinode_rayservice(serving["azure.research.serving.gpu"], 2).reason
    assert [p["name"] for p in catalog.profiles] == sorted(p["name"] for p in catalog.profiles)
    again = tau_cli("cluster", "profiles", "export")
    assert again.stdout == target.read_text()  # deterministic
    tc = live.store.get("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")
    stale = json.loads(json.dumps(tc))
    stale["metadata"]["generation"] = 2
    with pytest.raises(TauError, match="workload profiles are stale: observed at generation 1"):
        build_snapshot(stale)
    drifted = json.loads(json.dumps(tc))
    drifted["status"]["workloadProfiles"]["profiles"][0]["gpusPerWorker"] = 64
    with pytest.raises(TauError, match="profileSetHash mismatch"):
        build_snapshot(drifted)
    empty = json.loads(json.dumps(tc))
    empty["status"]["workloadProfiles"]["profileSetHash"] = ""
    with pytest.raises(TauError, match="empty profileSetHash"):
        build_snapshot(empty)
    live.store.delete("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")
    missing = tau_cli("cluster", "profiles", "export")
    assert missing.exit_code == 1 and "TauCluster singleton 'cluster' was not found" in missing.stderr


def test_explain_values_is_generated_from_the_umbrella_schema(tau_cli):
    schema = json.loads((repo_root() / "deploy" / "charts" / "taugrid" / "values.schema.json").read_text())
    assert packaged_reference() == render_markdown(schema), (
        "stale: python -m tau_cluster.explain deploy/charts/taugrid/values.schema.json --write")
    result = tau_cli("cluster", "explain-values")
    assert result.exit_code == 0 and result.stdout == packaged_reference()
    assert "| `baselineQueue.name` | string | `jobqueue` |" in result.stdout
    assert "| `taugrid-core.portal.enabled` | boolean | `true` |" in result.stdout


def test_schema_defaults_match_values_yaml():
    """The reference shows the schema's defaults; they must be the chart's real defaults."""
    import yaml

    chart = repo_root() / "deploy" / "charts" / "taugrid"
    values = yaml.safe_load((chart / "values.yaml").read_text())
    schema = json.loads((chart / "values.schema.json").read_text())

    def walk(node, path):
        for key, child in (node.get("properties") or {}).items():
            if "default" in child:
                value = values
                for part in (*path, key):
                    value = value[part]
                assert value == child["default"], ".".join((*path, key))
            walk(child, (*path, key))
    walk(schema, ())
