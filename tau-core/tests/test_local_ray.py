"""``engine: rayjob`` locally, the parts that need no running head: planning, head sizing, the GPU check,
the short temp root, the error without Ray, and a head that dies at start.

The real-Ray end-to-end tests are in ``tests/e2e/test_local_ray.py``.
"""

from __future__ import annotations

import os
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

from tau_core.backends.local import ray as local_ray
from tau_core.backends.local.backend import LocalBackend
from tau_core.errors import ConfigError
from tau_core.lifecycle import LogOptions, SubmitRequest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")  # no GPU here, whatever the machine has
    return tmp_path


def request(project: Path, **config: Any) -> SubmitRequest:
    (project / "tau").mkdir(parents=True, exist_ok=True)
    if not (project / "driver.py").exists():
        (project / "driver.py").write_text("print('hello')\n")
    cfg: dict[str, Any] = {"name": "tune", "engine": "rayjob", "entrypoint": "../driver.py",
                           "compute": {"workers": 1, "gpus_per_worker": 0}}
    cfg.update(config)
    return SubmitRequest(name="tune", config=cfg, objects=[], context={}, config_path=project / "tau" / "tune.yaml")


def fields(values: dict[str, Any]) -> Any:
    return lambda field: values.get(field)


def test_the_head_advertises_the_cpus_the_run_asks_for() -> None:
    cores = os.cpu_count() or 1
    example = {"compute.workers": 4, "compute.head_cpu_request": "500m", "compute.worker_cpu_request": "1"}
    assert local_ray.logical_cpus(fields(example)) == max(5, cores)
    tune = {"compute.workers": 1, "execution.launcher": "ray-tune", "execution.max_concurrent_trials": 2}
    assert local_ray.logical_cpus(fields(tune)) == max(4, cores)  # two trials, each its function + a worker
    assert local_ray.logical_cpus(fields({})) == max(2, cores)
    with pytest.raises(ConfigError, match="CPU quantity 'lots'"):
        local_ray.logical_cpus(fields({"compute.worker_cpu_request": "lots"}))


def test_a_gpu_target_fails_fast_on_a_machine_without_gpus(home: Path) -> None:
    with pytest.raises(ConfigError) as err:
        LocalBackend().submit(request(home / "p", compute={"workers": 1, "gpus_per_worker": 1}))
    assert "compute.gpus_per_worker=1" in err.value.message and "this machine has none" in err.value.message
    assert "compute.gpus_per_worker: 0" in (err.value.hint or "")
    assert not (home / "home" / "runs").exists() or not list((home / "home" / "runs").iterdir())


def test_without_ray_the_error_names_the_extra(home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # importlib.util.find_spec("ray") -> None: not installed
    with pytest.raises(ConfigError) as err:
        LocalBackend().submit(request(home / "p"))
    assert "Ray is not installed" in err.value.message and "pip install 'tau[ray]'" in (err.value.hint or "")


def test_the_plan_carries_the_cluster_runtime_env(home: Path) -> None:
    example = REPO / "examples" / "cpu-multi-interest-ray"
    from tau_core.backends.local.env import build_plan

    req = SubmitRequest(name="train", config={
        "name": "train", "engine": "rayjob", "entrypoint": "../multi_interest/train.py",
        "run": {"working_dir": "..", "working_dir_excludes": ["*.md"]}, "runtime": {"pip": ["PyYAML==6.0.2"]},
        "compute": {"workers": 4, "gpus_per_worker": 0}}, objects=[], context={},
        config_path=example / "tau" / "train.yaml")
    plan = build_plan(req, "train-1", dict(os.environ))
    ray = plan["ray"]
    assert ray["working_dir"] == str(example) and ray["excludes"] == ["*.md"]
    assert ray["entrypoint"] == f"{sys.executable} -m multi_interest.train" and ray["pip"] == ["PyYAML==6.0.2"]
    assert plan["env"]["TAU_NUM_WORKERS"] == "4" and plan["env"]["TAU_OUTPUT_DIR"].endswith("train-1")
    env = local_ray.job_env(plan["env"], {**os.environ, **plan["env"], "TAU_RETRY_ATTEMPT": "1", "HOME": "/x"})
    assert env["TAU_RETRY_ATTEMPT"] == "1" and "HOME" not in env and env["PYTHONUNBUFFERED"] == "1"


def test_a_session_head_address_is_planned_and_checked(home: Path) -> None:
    """TAU_LOCAL_RAY_ADDRESS: a Jobs API URL goes into the plan (no head of its own); anything else is refused
    with the variable named (the end-to-end run on a session head is in tests/e2e/test_local_ray.py)."""
    from tau_core.backends.local.env import build_plan

    req = request(home / "project")
    assert build_plan(req, "tune-1", {**os.environ})["ray"]["address"] is None
    env = {**os.environ, local_ray.ADDRESS_ENV: "http://127.0.0.1:8265/"}
    assert build_plan(req, "tune-1", env)["ray"]["address"] == "http://127.0.0.1:8265"
    for bad in ("127.0.0.1:8265", "ray://127.0.0.1:10001", "http://127.0.0.1"):
        with pytest.raises(ConfigError) as err:
            build_plan(req, "tune-1", {**os.environ, local_ray.ADDRESS_ENV: bad})
        assert f"TAU_LOCAL_RAY_ADDRESS={bad!r}" in err.value.message and "8265" in (err.value.hint or "")
    head = local_ray.attach_head("http://127.0.0.1:8265")
    assert head.external and head.alive() and head.record()["external"] is True
    local_ray.stop_head(head)  # not the run's: nothing to stop, nothing raised
    phase = local_ray.status_phase({**head.record(), "submission_id": "tune-1-a1", "job_state": "RUNNING"})
    assert phase is not None and phase.state == "active"
    assert phase.detail == "tune-1-a1 RUNNING on the Ray head at http://127.0.0.1:8265 (TAU_LOCAL_RAY_ADDRESS)"


def test_the_temp_root_stays_short_under_a_long_tmpdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = tmp_path / ("deep-" * 12)
    long.mkdir()
    monkeypatch.setenv("TMPDIR", str(long))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    root = local_ray.short_temp_root()
    try:
        assert root.parent == Path("/tmp") and root.name.startswith("tau-ray-") and len(str(root)) <= 24
        # Ray's deepest socket: <root>/session_YYYY-MM-DD_HH-MM-SS_ffffff_PID/sockets/plasma_store
        assert len(f"{root}/session_2026-12-02_19-08-42_257144_4194304/sockets/plasma_store") < 107
    finally:
        root.rmdir()


HEAD_EXITS = '''
import sys
print("stand-in head: refusing to start")
sys.exit(3)
'''


def test_a_head_that_exits_at_start_fails_the_attempt_with_its_log(home: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A stand-in ``ray`` on PYTHONPATH, because real Ray cannot be made to die at start on demand."""
    site = home / "fake-site"
    (site / "ray" / "scripts").mkdir(parents=True)
    (site / "ray" / "__init__.py").write_text("")
    (site / "ray" / "scripts" / "__init__.py").write_text("")
    (site / "ray" / "scripts" / "scripts.py").write_text(textwrap.dedent(HEAD_EXITS))
    monkeypatch.setenv("PYTHONPATH", str(site) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    backend = LocalBackend()
    ref = backend.submit(request(home / "p")).ref
    st = backend.wait(ref, timeout=60)
    assert not st.succeeded and st.extra.state == "Failed", st
    run = backend.find(ref.name)
    assert run is not None
    assert f"the local Ray head exited with code 3 (see {run.path / 'ray-head.log'})" in st.message, st.message
    assert "stand-in head: refusing to start" in (run.path / "ray-head.log").read_text()
    lines = list(backend.logs(ref, LogOptions(tail=-1)))
    assert any(x.startswith("[tau] starting a local Ray head: Jobs API http://127.0.0.1:") for x in lines), lines
    assert (run.path / "ray-auth-token").stat().st_mode & 0o777 == 0o600
    temp_root = next(x for x in lines if "temp root " in x).rsplit("temp root ", 1)[1]
    assert temp_root.startswith("/tmp/tau-ray-") and not Path(temp_root).exists()  # removed with the head
