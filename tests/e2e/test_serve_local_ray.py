"""``tau serve deploy NAME --local --kind rayservice``: a Serve application on a real local Ray head.

Drives the installed ``tau`` entry point in subprocesses, as a user would, against a tiny Serve app in a
temporary project: deploy, status until ready, an HTTP request to the reported URL on 127.0.0.1, a scale
to two replicas through Serve, delete.  The test fails when any process of the service's Ray head
(found by the ``TAU_LOCAL_RAY_RUN`` marker its processes carry) outlives the delete.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local import ray as local_ray

pytestmark = [pytest.mark.realclock, pytest.mark.slow]

TAU = str(Path(sys.executable).parent / "tau")
TIMEOUT = 240.0
APP = '''
import os

from ray import serve


@serve.deployment
class Greeter:
    def __call__(self, request):
        return f"{os.environ['GREETING']} from replica {os.getpid()}"


app = Greeter.bind()
'''


class Env:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.home = root / "tau-home"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith(("TAU_", "RAY_"))}
        self.env.update({"TAU_DATA_DIR": str(self.home), "NO_COLOR": "1", "HOME": str(root),
                         "KUBECONFIG": str(root / "no-kubeconfig")})

    def tau(self, *args: str, cwd: Path | None = None, code: int = 0) -> subprocess.CompletedProcess[str]:
        proc = subprocess.run([TAU, *args], cwd=cwd or self.root, env=self.env, capture_output=True, text=True,
                              timeout=TIMEOUT, stdin=subprocess.DEVNULL)
        assert proc.returncode == code, (args, proc.returncode, proc.stdout, proc.stderr)
        return proc

    def status(self) -> dict[str, Any]:
        return dict(json.loads(self.tau("serve", "status", "hello", "--local", "--kind", "rayservice",
                                        "-o", "json").stdout))

    def wait(self, ready_replicas: int) -> dict[str, Any]:
        deadline = time.monotonic() + TIMEOUT
        while True:
            doc = self.status()
            if doc["ready"] and doc["ready_replicas"] == ready_replicas:
                return doc
            assert doc["phase"] in ("Starting", "Ready") and time.monotonic() < deadline, (doc, self.log(doc))
            time.sleep(1.0)

    def log(self, doc: dict[str, Any]) -> str:
        return self.tau("logs", str(doc["run"]), "--tail", "-1").stdout


@pytest.fixture
def env(tmp_path: Path) -> Iterator[Env]:
    env = Env(tmp_path)
    yield env
    runs = sorted((env.home / "runs").glob("*")) if (env.home / "runs").is_dir() else []
    left = {r.name: local_ray.head_processes(r) for r in runs}
    for run in runs:  # never leave them running, even when failing
        local_ray.sweep(run)
    assert not {k: v for k, v in left.items() if v}, f"Ray processes outlived the service: {left}"


def get(url: str) -> str:
    with urllib.request.urlopen(url, timeout=30) as response:
        return str(response.read().decode())


def test_a_serve_app_deploys_answers_scales_and_is_deleted_without_leftovers(env: Env) -> None:
    project = env.root / "project"
    project.mkdir()
    (project / "greeter.py").write_text(textwrap.dedent(APP))
    deploy = ("serve", "deploy", "hello", "--local", "--kind", "rayservice", "--import-path", "greeter:app",
              "--env", "GREETING=hi")
    deployed = env.tau(*deploy, cwd=project)
    url = deployed.stdout.split(" on ", 1)[1].split()[0]
    assert url.startswith("http://127.0.0.1:") and url != "http://127.0.0.1:8000", deployed.stdout
    doc = env.wait(ready_replicas=1)
    assert doc["url"] == url and doc["application"] == "RUNNING" and doc["desired"] == 1, doc
    assert get(url + "/").startswith("hi from replica "), doc
    assert "unchanged" in env.tau(*deploy, cwd=project).stdout  # a redeploy keeps the running service
    run_dir = env.home / "runs" / str(doc["run"])
    head = json.loads((run_dir / "serve-head.json").read_text())
    token = (run_dir / local_ray.TOKEN_FILE)
    assert token.stat().st_mode & 0o777 == 0o600 and token.read_text().strip() not in json.dumps(head)
    assert len(local_ray.head_processes(run_dir)) >= 3  # ray start, gcs_server, raylet, Serve's actors...

    env.tau("serve", "scale", "hello", "--local", "--kind", "rayservice", "--replicas", "2")
    doc = env.wait(ready_replicas=2)
    assert doc["desired"] == 2 and doc["application"] == "RUNNING", doc
    replies = {get(url + "/") for _ in range(12)}
    assert all(r.startswith("hi from replica ") for r in replies), replies
    too_many = env.tau("serve", "scale", "hello", "--local", "--kind", "rayservice", "--replicas", "99", code=2)
    assert "--replicas 99" in too_many.stderr and "Traceback" not in too_many.stderr

    deleted = env.tau("serve", "delete", "hello", "--local", "--kind", "rayservice")
    assert f"deleted local service hello (run {doc['run']})" in deleted.stdout
    assert local_ray.head_processes(run_dir) == []  # delete returned after the head went
    assert not Path(head["temp_root"]).exists(), head["temp_root"]
    log = env.log(doc)
    assert "[serve] application default RUNNING on " + url in log and "[serve] stopping the local Ray head" in log
    gone = env.tau("serve", "status", "hello", "--local", "--kind", "rayservice", code=1)
    assert "no local service named hello" in gone.stderr
    assert env.tau("serve", "delete", "hello", "--local", "--kind", "rayservice").stdout.strip().endswith(
        "already gone")
