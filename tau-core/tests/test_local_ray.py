"""``engine: rayjob`` locally: the supervisor starts a Ray head for the run, points the driver at it
with ``RAY_ADDRESS`` and tears it down afterwards.

Ray itself is not installed here, so the head is a stand-in ``ray`` package on ``PYTHONPATH`` whose
``ray.scripts.scripts start --head --block --port=N`` listens on the port until it is terminated.
What is under test is the orchestration: port selection, readiness wait, environment, teardown.
"""

from __future__ import annotations

import os
import textwrap
from pathlib import Path

import pytest

from tau_core.lifecycle import LogOptions, SubmitRequest
from tau_core.local.backend import LocalBackend

HEAD = '''
import os, signal, socket, sys, time
port = int(next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--port=")))
pidfile = os.environ["FAKE_RAY_PIDFILE"]
with open(pidfile, "w") as fh:
    fh.write(str(os.getpid()))
sock = socket.socket()
sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
sock.bind(("127.0.0.1", port))
sock.listen()
signal.signal(signal.SIGTERM, lambda *a: sys.exit(0))
while True:
    time.sleep(0.1)
'''


@pytest.fixture
def fake_ray(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    site = tmp_path / "fake-site"
    (site / "ray" / "scripts").mkdir(parents=True)
    (site / "ray" / "__init__.py").write_text("")
    (site / "ray" / "scripts" / "__init__.py").write_text("")
    (site / "ray" / "scripts" / "scripts.py").write_text(HEAD)
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setenv("PYTHONPATH", str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    monkeypatch.setenv("FAKE_RAY_PIDFILE", str(tmp_path / "head.pid"))
    return tmp_path


def test_rayjob_driver_runs_against_a_ray_head_started_for_the_run(fake_ray: Path) -> None:
    project = fake_ray / "project"
    (project / "tau").mkdir(parents=True)
    (project / "driver.py").write_text(textwrap.dedent("""
        import os, socket
        host, port = os.environ["RAY_ADDRESS"].split(":")
        socket.create_connection((host, int(port)), timeout=5).close()
        print("connected to", os.environ["RAY_ADDRESS"], "world", os.environ["TAU_WORLD_SIZE"])
    """))
    config = {"name": "tune", "engine": "rayjob", "entrypoint": "../driver.py", "compute": {"workers": 2}}
    backend = LocalBackend()
    ref = backend.submit(SubmitRequest(name="tune", config=config, objects=[], context={},
                                       config_path=project / "tau" / "tune.yaml")).ref
    st = backend.wait(ref, timeout=60)
    assert st.succeeded, (st, list(backend.logs(ref, LogOptions(tail=-1))))
    lines = list(backend.logs(ref, LogOptions(tail=-1)))
    assert any(x.startswith("[tau] starting a local Ray head on 127.0.0.1:") for x in lines)
    assert any(x.startswith("connected to 127.0.0.1:") and x.endswith("world 2") for x in lines), lines
    head = int((fake_ray / "head.pid").read_text())
    with pytest.raises(ProcessLookupError):
        os.kill(head, 0)
