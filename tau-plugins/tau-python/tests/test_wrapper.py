"""The rendered payload really runs: decode it from a client dry-run and execute the wrapper like a pod."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

from ruamel.yaml import YAML

import tau

MODULE = '''\
import json
import tau


@tau.train(name="wrapped", runtime_pip=["x"], queue="q", namespace="ns")
def train(ctx, scale=1):
    return {"name": ctx.name, "upstream": ctx.upstream_checkpoint, "scale": scale, "remote": ctx.is_remote,
            "data": ctx.data_dir}
'''


def _payload_and_env(stdout: str) -> tuple[dict[str, bytes], dict[str, str]]:
    docs = [d for d in YAML(typ="safe", pure=True).load_all(stdout) if d]
    head = docs[0]["spec"]["rayClusterSpec"]["headGroupSpec"]["template"]["spec"]
    init = next(c for c in head["initContainers"] if c["name"] == "tau-payload")
    raw = base64.b64decode(next(e["value"] for e in init["env"] if e["name"] == "TAU_PAYLOAD_B64"))
    files = {k: base64.b64decode(v) for k, v in json.loads(gzip.decompress(raw))["files"].items()}
    env = {e["name"]: str(e["value"]) for e in head["containers"][0]["env"] if "value" in e}
    return files, env


def test_the_staged_wrapper_calls_the_function_with_a_ctx(repo: Path, tmp_path: Path) -> None:
    (repo / "wf.py").write_text(MODULE)
    handle = tau.workloads(repo / "wf.py")[0]
    handle.entrypoint_kwargs = {"scale": 3}
    out = handle.submit(dry_run="client", capture=True)
    files, env = _payload_and_env(out.stdout)
    assert sorted(files) == ["tau_manifest.json", "tau_py_wrapper.py", "tau_user_module.py"]
    script = tmp_path / "script"
    script.mkdir()
    for name, data in files.items():
        (script / name).write_bytes(data)
    pod_env = {**os.environ, **env, "TAU_UPSTREAM_CHECKPOINT": "/data/checkpoints/finetunes/x/artifacts/m.bin",
               "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.run([sys.executable, str(script / "tau_py_wrapper.py")], capture_output=True, text=True,
                          env=pod_env, check=False)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout.strip().splitlines()[-1])["tau_result"]
    assert result == {"name": "wrapped", "upstream": "/data/checkpoints/finetunes/x/artifacts/m.bin", "scale": 3,
                      "remote": True, "data": "/data"}
    assert env["TAU_CLUSTER_JOB"] == "1"  # so a .submit() inside this function is refused
