"""Faults of ``tau cluster install``: each gives one clear error and exit 1, never a traceback."""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

from tau_testing.charts import helm_env

HELM3 = """#!/bin/sh
# A Helm 3 stand-in: answers the version and capability probes like Helm 3.14, logs every call.
echo "$@" >> "{log}"
case "$1" in
  version) echo "v3.14.4+g81c902a" ;;
  upgrade)
    if [ "$2" = "--help" ]; then
      printf 'Flags:\\n      --atomic   roll back on failure\\n      --install\\n      --reset-values\\n'
      exit 0
    fi
    echo "Error: UPGRADE FAILED: the stand-in does not install anything" >&2; exit 1 ;;
  list) echo "[]" ;;
  template) exec "{real}" "$@" ;;
  *) echo "Error: unexpected call" >&2; exit 1 ;;
esac
"""


def test_missing_helm(tau_cli, env_for, tmp_path):
    env_for(path=str(tmp_path))
    result = tau_cli("cluster", "install", "--dry-run")
    assert result.exit_code == 1
    assert "error: Helm is required: install Helm 3 or 4" in result.stderr
    assert "Traceback" not in result.stderr


def test_chart_that_fails_to_render(tau_cli, env_for, umbrella):
    env_for()
    result = tau_cli("cluster", "install", "--dry-run", "--chart", str(umbrella),
                     "--set", "baselineQueue.gpu.flavors=null")
    assert result.exit_code == 1
    assert "helm template failed (using v4" in result.stderr
    assert "baselineQueue.gpu.enabled is true but baselineQueue.gpu.flavors is empty" in result.stderr


def test_a_broken_chart_never_reaches_the_cluster(tau_cli, env_for, live, umbrella):
    env_for(live)
    live.requests.clear()
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--set", "gpu-monitoring.namespace=mon")
    assert result.exit_code == 1
    assert "gpu-monitoring.namespace (mon) is not supported" in result.stderr
    assert live.requests.entries == []


def test_a_chart_without_its_tau_crds_is_refused(tau_cli, env_for, helm_bin, tmp_path):
    import shutil

    from tau_testing.charts import build_test_umbrella
    from tau_testing.paths import repo_root

    deploy = tmp_path / "deploy"
    shutil.copytree(repo_root() / "deploy" / "charts", deploy / "charts",
                    ignore=shutil.ignore_patterns("crds", "charts", "*.tgz"))
    (deploy / "crds").mkdir()  # nothing synced into the controller chart
    chart = build_test_umbrella(tmp_path / "build", helm_bin, deploy=deploy)
    env_for()
    result = tau_cli("cluster", "install", "--chart", str(chart))
    assert result.exit_code == 1
    assert "renders a TauCluster but no Tau CRDs" in result.stderr
    assert "deploy/tools/sync_chart_crds.py" in result.stderr


def test_unreachable_default_chart_is_explained(tau_cli, env_for):
    env_for()
    result = tau_cli("cluster", "install", "--dry-run", "--timeout", "20s",
                     "--chart", "oci://mcr.microsoft.com/aks/ai-runtime/helm/taugrid")
    assert result.exit_code == 1
    from tau_core import __version__

    assert "cannot fetch the default TauGrid chart oci://mcr.microsoft.com/aks/ai-runtime/helm/taugrid version " \
           f"{__version__}" in result.stderr
    assert "hint: or pass --chart" in result.stderr


def test_release_in_another_namespace_is_refused(tau_cli, env_for, live, helm_bin, tmp_path):
    chart = tmp_path / "tiny"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: taugrid\nversion: 0.0.1\n")
    (chart / "templates" / "cm.yaml").write_text("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: marker}\n")
    subprocess.run([str(helm_bin), "install", "taugrid", str(chart), "-n", "elsewhere", "--create-namespace"],
                   env={**helm_env(tmp_path), "KUBECONFIG": str(live.kubeconfig_path)}, check=True,
                   capture_output=True)
    env_for(live)
    result = tau_cli("cluster", "install", "--chart", str(chart))
    assert result.exit_code == 1
    assert "Helm release taugrid already exists in namespace elsewhere" in result.stderr
    assert "hint: rerun with --namespace elsewhere" in result.stderr


def test_readiness_timeout_leaves_the_release_and_says_what_failed(tau_cli, env_for, live, umbrella):
    live.stand_in.enabled = False  # no controller: the TauCluster never reports status
    env_for(live)
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--timeout", "3s")
    assert result.exit_code == 1
    assert "error: TauGrid did not become ready within 3s: TauCluster: generation 1 not yet observed" in result.stderr
    assert "\r" not in result.stderr  # no progress line drawn when stderr is not a terminal
    assert live.store.get("v1", "Secret", "tau-system", "sh.helm.release.v1.taugrid.v2") is not None


def test_bad_timeout_and_empty_flags_are_usage_errors(tau_cli, env_for):
    env_for()
    assert tau_cli("cluster", "install", "--timeout", "soon").exit_code == 2
    bad = tau_cli("cluster", "install", "--release", " ")
    assert bad.exit_code == 2 and "--release must not be empty" in bad.stderr
    zero = tau_cli("cluster", "install", "--timeout", "0s")
    assert zero.exit_code == 2 and "invalid --timeout" in zero.stderr


def test_helm3_gets_atomic_and_no_server_side_flags(tau_cli, env_for, live, umbrella, tmp_path, helm_bin):
    log = tmp_path / "calls.log"
    bindir = tmp_path / "bin"
    bindir.mkdir()
    fake = bindir / "helm"
    fake.write_text(HELM3.format(log=log, real=helm_bin))
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    env_for(live, path=str(bindir) + ":/usr/bin:/bin")
    result = tau_cli("cluster", "install", "--chart", str(umbrella), "--atomic", "--timeout", "30s")
    assert result.exit_code == 1
    assert f"helm upgrade failed (using v3.14.4+g81c902a at {fake})" in result.stderr
    assert "the stand-in does not install anything" in result.stderr
    upgrades = [line for line in Path(log).read_text().splitlines() if line.startswith("upgrade --install")]
    assert len(upgrades) == 1  # phase 1 failed, phase 2 never ran
    assert "--server-side=true" not in upgrades[0] and "--force-conflicts" not in upgrades[0]
    assert "--set baselineQueue.enabled=false" in upgrades[0] and "--wait" in upgrades[0]
