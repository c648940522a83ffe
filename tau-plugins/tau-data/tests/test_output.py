"""Output contracts: progress bars only on a terminal's stderr, JSON references, filters."""

from __future__ import annotations

import json
import os
import pty
import shutil
import subprocess
import sys


def _tau() -> list[str]:
    exe = shutil.which("tau")
    return [exe] if exe else [sys.executable, "-m", "tau_core.cli"]


def test_progress_bar_on_a_terminal_only(tmp_path, dataset_dir):  # type: ignore[no-untyped-def]
    def register(ref: str) -> list[str]:
        return [*_tau(), "data", "dataset", "register", ref, "--registry", f"file://{tmp_path / 'r'}",
                "--purpose", "pretrain", "--from", str(dataset_dir)]

    args = register("web@1.0")
    master, slave = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    proc = subprocess.run(args, stdout=subprocess.PIPE, stderr=slave, env=env, timeout=120)
    os.close(slave)
    seen = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    os.close(master)
    assert proc.returncode == 0
    assert b"hashing" in seen and b"100%" in seen
    assert proc.stdout.decode().startswith("registered web@1.0")
    piped = subprocess.run(register("web@1.1"), capture_output=True, text=True, timeout=120)
    assert piped.returncode == 0 and piped.stderr == ""


def test_ref_json_list_filters_and_usage_errors(tau_cli, tmp_path, dataset_dir):  # type: ignore[no-untyped-def]
    reg = f"file://{tmp_path / 'r'}"
    assert tau_cli("data", "dataset", "register", "web@1.0", "--registry", reg, "--purpose", "pretrain",
                   "--from", str(dataset_dir), "--tag", "team=nlp").exit_code == 0
    assert tau_cli("data", "dataset", "register", "qa@1", "--registry", reg, "--purpose", "eval",
                   "--from", str(dataset_dir), "--eval-task", "qa", "--eval-metric", "f1").exit_code == 0
    ref = json.loads(tau_cli("data", "dataset", "ref", "web@1.0", "--registry", reg).stdout)
    assert ref["recommended"] == "node_local_stage" and len(ref["modes"]["node_local_stage"]["files"]) == 3
    assert ref["digest"].startswith("sha256:") and "sig=" not in json.dumps(ref)
    names = lambda *a: [r["name"] for r in json.loads(tau_cli("data", "dataset", "list", "--registry", reg,  # noqa: E731
                                                                   "-o", "json", *a).stdout)]
    assert names() == ["qa", "web"]
    assert names("--purpose", "eval") == ["qa"]
    assert names("--tag", "team=nlp") == ["web"]
    bad = tau_cli("data", "dataset", "list", "--registry", reg, "--purpose", "sft")
    assert bad.exit_code == 2 and "--purpose must be one of: pretrain, rl, eval" in bad.stderr
    both = tau_cli("data", "dataset", "register", "x@1", "--registry", reg, "--purpose", "rl",
                   "--from", str(dataset_dir), "--manifest", "m.json")
    assert both.exit_code == 2 and "mutually exclusive" in both.stderr
    neither = tau_cli("data", "dataset", "register", "x@1", "--registry", reg, "--purpose", "rl")
    assert neither.exit_code == 2 and "one of --from or --manifest is required" in neither.stderr
    kind = tau_cli("data", "dataset", "register", "x@1", "--registry", reg, "--purpose", "rl", "--rl-kind", "chat",
                   "--from", str(dataset_dir))
    assert kind.exit_code == 2 and "rl.kind 'chat' must be one of" in kind.stderr
    default = tau_cli("data", "dataset", "register", "x@1", "--purpose", "rl", "--from", str(dataset_dir),
                      env={"TAU_DATA_REGISTRY": None})
    assert default.exit_code == 2 and "az://<account>/<container>" in default.stderr
    shown = tau_cli("data", "dataset", "show", "qa@1", "--registry", reg)
    assert "eval.task:" in shown.stdout and "Location:" in shown.stdout
