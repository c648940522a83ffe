"""The pvc backend specifics, on the simulated TauGrid cluster.

Proven only against the simulator: the pods are created, watched, logged and deleted through the real
Kubernetes API of tau_testing.sim, and each pod's own shell script is executed by ``VolumeShell`` on the
scenario's volume directory (host sh/coreutils/flock in place of busybox); no kubelet runs it.
"""

from __future__ import annotations

import json

import pytest

from tau_core.modelref import resolve, resolve_model_ref
from tau_core.storage import open_store
from tau_testing.sim.scenarios.taugrid import NAMESPACE


@pytest.fixture
def grid(pvc_grid, monkeypatch, tau_env):  # type: ignore[no-untyped-def]
    monkeypatch.setenv("KUBECONFIG", tau_env["KUBECONFIG"])
    return pvc_grid


def _live_helpers(grid) -> list[str]:  # type: ignore[no-untyped-def]
    return [p["metadata"]["name"] for p in grid.cluster.store.list("v1", "Pod", NAMESPACE)
            if p["metadata"]["name"].startswith("tau-pvc-") and not p["metadata"].get("deletionTimestamp")]


def test_escaping_symlink_on_the_volume_is_refused_and_nothing_is_written(tau_cli, grid, dataset_dir, tmp_path):  # type: ignore[no-untyped-def]
    outside = tmp_path / "outside"
    outside.mkdir()
    (grid.volume / "dataset-registry" / "datasets").mkdir(parents=True)
    (grid.volume / "dataset-registry" / "datasets" / "web").symlink_to(outside)
    result = tau_cli("data", "dataset", "register", "web@1.0", "--registry", "pvc", "--purpose", "pretrain",
                     "--from", str(dataset_dir))
    assert result.exit_code == 2 and "symbolic link or a path outside the registry root" in result.stderr, result
    assert list(outside.iterdir()) == []
    listing = tau_cli("data", "dataset", "list", "--registry", "pvc")
    assert listing.exit_code == 2 and "is a symbolic link" in listing.stderr
    assert _live_helpers(grid) == []


def test_records_land_on_the_volume_and_serve_resolves_models_there(tau_cli, grid, dataset_dir):  # type: ignore[no-untyped-def]
    assert tau_cli("data", "dataset", "register", "web@1.0", "--registry", "pvc", "--purpose", "eval",
                   "--eval-task", "mmlu", "--from", str(dataset_dir)).exit_code == 0
    on_disk = json.loads((grid.volume / "dataset-registry/datasets/web/1.0/dataset.json").read_text())
    assert on_disk["eval"]["task"] == "mmlu" and on_disk["name"] == "web"
    assert not [p for p in (grid.volume / "dataset-registry/datasets/web/1.0").iterdir() if p.name.endswith(".tmp")]

    grid.write("checkpoints/finetunes/ft-1/artifacts.json", json.dumps([{"name": "final", "path": "artifacts/final"}]))
    grid.write("checkpoints/finetunes/ft-1/model.json", json.dumps({"model": "qwen", "metrics": {"eval_loss": 1.5}}))
    grid.write("checkpoints/finetunes/ft-1/artifacts/final/w.bin", b"w")
    out = tau_cli("data", "model", "index", "rebuild", "--registry", "pvc")
    assert out.stdout.strip() == "indexed 1 model run(s)", out
    assert tau_cli("data", "model", "alias", "set", "qwen", "prod", "ft-1", "--registry", "pvc").exit_code == 0
    resolved = resolve_model_ref("qwen:prod", open_store("pvc"))
    assert resolved.checkpoint_path == "/data/checkpoints/finetunes/ft-1/artifacts/final"
    assert resolve("finetune/ft-1", "pvc", namespace=NAMESPACE).checkpoint_path == resolved.checkpoint_path
    assert _live_helpers(grid) == []
