"""``.submit()`` renders through tau_core in-process; secrets never reach a manifest; TAU_BINARY still works."""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from ruamel.yaml import YAML

import tau
from tau import TauCLIError

PIP = ["numpy"]


def _objects(text: str) -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(text.replace("# from:", "#")) if d]


def _module(repo: Path) -> Path:
    path = repo / "wf.py"
    path.write_text("def main(ctx, n=1):\n    return n\n")
    return path


def test_dry_run_renders_the_managed_rayjob_in_process(repo: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _module(repo)
    monkeypatch.setattr("subprocess.run", None)  # in-process: no subprocess may be started
    handle = tau.train("t1", gpus=2, workers=3, runtime_pip=PIP, entrypoint="wf.py:main", queue="q", namespace="ns",
                       entrypoint_kwargs={"n": 2})
    out = handle.submit(dry_run="client", capture=True)
    rayjob = _objects(out.stdout)[0]
    assert rayjob["kind"] == "RayJob" and rayjob["metadata"]["name"] == "tau-t1"
    workers = rayjob["spec"]["rayClusterSpec"]["workerGroupSpecs"][0]
    assert workers["replicas"] == 3
    assert workers["template"]["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] in (2, "2")
    assert "python3 /script/tau_py_wrapper.py" in rayjob["spec"]["entrypoint"]


def test_secrets_become_a_secret_and_secret_key_refs(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                     tmp_path: Path) -> None:
    _module(repo)
    token_file = tmp_path / "token"
    token_file.write_text("file-secret-value\n")
    monkeypatch.setenv("HF_TOKEN_SRC", "env-secret-value")
    seen: list[str] = []
    import tau._staging as staging

    real_stage = staging.stage

    def spy(handle: Any, directory: Path, **kw: Any) -> Path:
        path = real_stage(handle, directory, **kw)
        seen.append(path.read_text())
        payload = directory / staging.SECRET_PAYLOAD
        assert stat.S_IMODE(payload.stat().st_mode) == 0o600
        seen.append(str(directory))
        return path

    monkeypatch.setattr("tau._submit.stage", spy)
    handle = tau.train("t2", runtime_pip=PIP, entrypoint="wf.py:main", queue="q", namespace="ns",
                       env={"HF_TOKEN": tau.secret_from_env("HF_TOKEN_SRC"), "DB": tau.secret_from_file(token_file),
                            "PLAIN": "visible", "LIT": tau.secret("literal-value"),
                            "EXISTING": tau.secret_ref("team-secrets", "key")})
    out = handle.submit(dry_run="client", capture=True)
    manifest_text, staged_dir = seen
    for value in ("env-secret-value", "file-secret-value", "literal-value"):
        assert value not in manifest_text and value not in out.stdout and value not in out.stderr
    assert not Path(staged_dir).exists()  # the payload never outlives the call
    objects = _objects(out.stdout)
    secret = next(o for o in objects if o["kind"] == "Secret")
    assert secret["metadata"]["name"] == "tau-t2-secrets"
    assert secret["stringData"] == {"DB": "<redacted>", "HF_TOKEN": "<redacted>", "LIT": "<redacted>"}
    head = objects[0]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e for e in head["env"]}
    assert env["HF_TOKEN"]["valueFrom"]["secretKeyRef"] == {"name": "tau-t2-secrets", "key": "HF_TOKEN"}
    # existing-Secret references follow the direct path's rule: redacted in a client dry-run
    assert "secretKeyRef" in env["EXISTING"]["valueFrom"] and "team-secrets" not in out.stdout
    assert env["PLAIN"]["value"] == "visible"


def test_tau_binary_selects_another_cli_and_its_exit_code_is_kept(repo: Path, monkeypatch: pytest.MonkeyPatch,
                                                                  tmp_path: Path) -> None:
    _module(repo)
    handle = tau.train("t3", runtime_pip=PIP, entrypoint="wf.py:main", queue="q", namespace="ns")
    tau_exe = Path(sys.executable).parent / "tau"
    monkeypatch.setenv("TAU_BINARY", str(tau_exe))
    out = handle.submit(dry_run="client", capture=True)
    assert "kind: RayJob" in out.stdout
    failing = tmp_path / "old-tau"
    failing.write_text("#!/bin/sh\necho 'error: this tau is too old' >&2\nexit 7\n")
    failing.chmod(0o755)
    monkeypatch.setenv("TAU_BINARY", str(failing))
    with pytest.raises(TauCLIError, match=r"exit=7\): error: this tau is too old") as exc:
        handle.submit(dry_run="client", capture=True)
    assert exc.value.exit_code == 7


def test_local_call_runs_with_the_local_layout(repo: Path) -> None:
    seen: dict[str, Any] = {}

    @tau.train("local-t", runtime_pip=PIP, checkpoint_artifact="m.bin")
    def train(ctx: tau.Ctx, scale: int = 1) -> int:
        seen.update(vars(ctx))
        return 3 * scale

    assert train(scale=2) == 6
    data = Path(os.environ["TAU_DATA_DIR"])
    assert seen["data_dir"] == str(data / "data") and seen["hot_dir"] == str(data / "hot")
    assert seen["durable_checkpoints_dir"] == str(data / "data" / "checkpoints" / "finetunes" / "local-t")
    assert Path(seen["durable_checkpoints_dir"]).is_dir() and seen["is_remote"] is False
    assert seen["storage_hot_status"] == "local" and seen["manifest"]["name"] == "local-t"
