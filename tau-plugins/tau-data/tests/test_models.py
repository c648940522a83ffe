"""Model registry verbs, the evidence link to a real experiment store, and the tau_core resolver."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tau_core.errors import NotFoundError, UsageError
from tau_core.modelref import resolve_model_ref
from tau_core.storage import open_store


def _finetune(root: Path, run: str, meta: dict | None) -> None:  # type: ignore[type-arg]
    run_dir = root / "checkpoints" / "finetunes" / run
    (run_dir / "artifacts" / "final").mkdir(parents=True)
    (run_dir / "artifacts" / "final" / "weights.bin").write_bytes(b"w" * 8)
    (run_dir / "artifacts.json").write_text(json.dumps({"artifacts": [
        {"name": "step-100", "path": "artifacts/step-100"}, {"name": "final", "path": "artifacts/final"}]}))
    if meta is not None:
        (run_dir / "model.json").write_text(json.dumps(meta))


def _portal(*args: str) -> None:
    exe = shutil.which("taugrid-portal")
    assert exe, "taugrid-portal (the experiment store CLI) must be installed for the evidence test"
    subprocess.run([exe, "experiment", *args], check=True, capture_output=True)


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    root = tmp_path / "data"
    _finetune(root, "ft-a", {"model": "llama-7b", "primary_metric": {"name": "eval_loss", "direction": "lower"}})
    _finetune(root, "ft-b", {"model": "llama-7b", "primary_metric": {"name": "eval_loss", "direction": "lower"}})
    _finetune(root, "ft-old", None)
    store = tmp_path / "exp"
    _portal("init", "proj", "--store", str(store))
    for run, loss, acc, cfg in (("ft-a", "0.50", "0.81", "cfg-a"), ("ft-b", "0.42", "0.79", "cfg-b")):
        _portal("track", run, "--store", str(store), "--config-hash", cfg, "--metric", f"eval_loss={loss}",
                "--metric", f"accuracy={acc}", "--step", "100")
    return root


def test_index_rebuild_links_evidence_and_best_ranks_on_it(tau_cli, data_root, tmp_path):  # type: ignore[no-untyped-def]
    reg = f"file://{data_root}"
    out = tau_cli("data", "model", "index", "rebuild", "--registry", reg, "--model", "legacy",
                  "--store", str(tmp_path / "exp"))
    assert out.exit_code == 0 and out.stdout.strip() == "indexed 3 model run(s)", out
    shown = json.loads(tau_cli("data", "model", "show", "llama-7b/ft-b", "--registry", reg).stdout)
    assert shown["evidence"]["config_hash"] == "cfg-b" and shown["metrics"]["eval_loss"] == pytest.approx(0.42)
    assert shown["primary_metric"] == {"name": "eval_loss", "value": pytest.approx(0.42), "direction": "lower"}
    assert tau_cli("data", "model", "best", "llama-7b", "--registry", reg).stdout.strip() == "llama-7b@ft-b"
    assert tau_cli("data", "model", "best", "llama-7b", "--registry", reg, "--metric", "accuracy").stdout.strip() \
        == "llama-7b@ft-a"
    assert tau_cli("data", "model", "best", "llama-7b", "--registry", reg, "--metric", "accuracy",
                   "--direction", "lower").stdout.strip() == "llama-7b@ft-b"
    listed = json.loads(tau_cli("data", "model", "list", "--registry", reg, "--model", "llama-7b",
                                "--metric", "accuracy", "--sort", "desc", "-o", "json").stdout)
    assert [r["run"] for r in listed] == ["ft-a", "ft-b"]
    legacy = json.loads(tau_cli("data", "model", "list", "--registry", reg, "--model", "legacy", "-o", "json").stdout)
    assert [r["run"] for r in legacy] == ["ft-old"] and legacy[0]["evidence"] == {}


def test_alias_and_resolver(tau_cli, data_root):  # type: ignore[no-untyped-def]
    reg = f"file://{data_root}"
    assert tau_cli("data", "model", "index", "rebuild", "--registry", reg).exit_code == 0
    bad = tau_cli("data", "model", "alias", "set", "llama-7b", "Prod", "ft-a", "--registry", reg)
    assert bad.exit_code == 2 and "lowercase alphanumerics" in bad.stderr
    missing = tau_cli("data", "model", "alias", "set", "llama-7b", "prod", "ft-zzz", "--registry", reg)
    assert missing.exit_code == 1 and "is not registered" in missing.stderr
    assert tau_cli("data", "model", "alias", "set", "llama-7b", "prod", "ft-a", "--registry", reg).exit_code == 0
    assert tau_cli("data", "model", "alias", "set", "llama-7b", "prod", "ft-b", "--registry", reg).exit_code == 0
    assert tau_cli("data", "model", "alias", "get", "llama-7b", "prod", "--registry", reg).stdout.strip() == \
        "llama-7b@ft-b"

    store = open_store(reg)
    assert resolve_model_ref("llama-7b:prod", store).checkpoint_path == "/data/checkpoints/finetunes/ft-b/artifacts/final"
    assert resolve_model_ref("llama-7b@ft-a", store).run == "ft-a"
    assert resolve_model_ref("finetune/ft-a:step-100", store).checkpoint_path == \
        "/data/checkpoints/finetunes/ft-a/artifacts/step-100"
    assert resolve_model_ref("finetune/ft-old", store).checkpoint_path == \
        "/data/checkpoints/finetunes/ft-old/artifacts/final"
    for ref, error in (("llama-7b:nope", NotFoundError), ("finetune/../etc", UsageError),
                       ("finetune/ft-a:../../x", UsageError), ("llama-7b", UsageError), ("finetune/ft-zz", NotFoundError)):
        with pytest.raises(error):
            resolve_model_ref(ref, store)
