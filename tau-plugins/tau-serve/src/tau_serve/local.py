"""Local serving: ``tau serve deploy NAME --local --kind deployment --command ...`` on 127.0.0.1.

The server runs as a local run under the local backend's supervisor (``python -m
tau_core.backends.local.supervisor RUN_DIR``): its own process group, timestamped ``output.log``, SIGTERM
then SIGKILL on stop.  A small index ``<tau data dir>/serve/<NAME>.json`` maps the service to its current
run and port, so ``status``/``scale``/``delete --local`` manage it.  One process serves one port, so a
local service scales between 0 (stopped) and 1 replica.

``--kind rayservice --local`` runs :mod:`tau_serve.ray_local` the same way: a real Ray head of its own with
the Serve application on ``127.0.0.1:PORT`` (a free port unless ``--port`` is given), scaled by setting
``num_replicas`` as on a cluster; without Ray installed the error names the extra to install.
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

from tau_core.errors import NotFoundError, UsageError
from tau_core.output import echo
from tau_serve.options import DeployArgs
from tau_serve.spec import DEFAULT_IMPORT_PATH, DEFAULT_SERVE_PORT, checkpoint_path, parse_env

HOST = "127.0.0.1"
#: in a planned argv: replaced by the run's directory when the run is registered
RUN_DIR = "{run_dir}"
INDEX_SCHEMA = "tau.serve.local.v1"


def _paths() -> Any:
    from tau_core.backends.local import paths

    return paths


def index_file(name: str) -> Path:
    return Path(_paths().tau_home()) / "serve" / f"{name}.json"


def read_index(name: str) -> dict[str, Any] | None:
    path = index_file(name)
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def _write_index(name: str, data: dict[str, Any]) -> None:
    from tau_core.fsutil import write_json_atomic

    path = index_file(name)
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    write_json_atomic(path, data, mode=0o600)


def service_plan(args: DeployArgs) -> dict[str, Any]:
    """What to run, on which port, with which environment (no secrets: ``--env-secret`` is refused)."""
    if args.env_secrets:
        raise UsageError("--env-secret cannot be used with --local: Kubernetes Secrets do not exist on this machine",
                         hint="export the variable in your shell, or pass it with --env")
    if args.kind == "rayservice":
        port, argv = _rayservice_argv(args)
    else:
        if not args.command:
            raise UsageError("--local --kind=deployment needs --command (the server to run on this machine)")
        port = (args.deployment_ports[0] if args.deployment_ports else args.service_target_port or args.service_port
                or DEFAULT_SERVE_PORT)
        argv = [*args.command, *args.args]
    env = dict(parse_env(args.env))
    env.update({"HOST": HOST, "PORT": str(port)})
    if args.checkpoint:
        env["TAU_MODEL_PATH"] = str(_paths().map_container_path(checkpoint_path(args.checkpoint)))
    return {"schema": INDEX_SCHEMA, "name": args.name, "kind": args.kind, "port": port, "argv": argv, "env": env,
            "cwd": os.getcwd(), "readiness_path": args.readiness_path}


SERVE_MODULES = ("ray", "fastapi", "uvicorn", "starlette")  # ray[serve]: its proxy answers through these


def _rayservice_argv(args: DeployArgs) -> tuple[int, list[str]]:
    """``python -m tau_serve.ray_local ...`` on a free port (the current one on a redeploy) unless --port."""
    missing = [m for m in SERVE_MODULES if importlib.util.find_spec(m) is None]
    if missing:
        what = ("Ray is not installed" if "ray" in missing
                else f"Ray Serve's HTTP stack is missing ({', '.join(missing)})")
        raise UsageError(f"--local --kind=rayservice runs Ray Serve on this machine, and {what}",
                         hint="install the extra: pip install 'tau[ray]' (or use --kind=deployment --command ...)")
    current = read_index(args.name)
    port = args.port or (int(current["port"]) if current and current.get("kind") == "rayservice" else free_port())
    argv = [sys.executable, "-m", "tau_serve.ray_local", "--run-dir", RUN_DIR, "--import-path",
            args.import_path or DEFAULT_IMPORT_PATH, "--port", str(port), "--replicas", str(args.replicas or 1)]
    if args.app_args:
        from tau_serve.options import app_args

        argv += ["--app-args", json.dumps(app_args(args.app_args), sort_keys=True)]
    return port, argv


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


def deploy_local(args: DeployArgs) -> None:
    plan = service_plan(args)
    current = read_index(args.name)
    if current is not None and _alive(current):
        if {k: current.get(k) for k in plan} == plan:
            echo(f"local service {args.name} is already running on http://{HOST}:{plan['port']} (unchanged)")
            return
        _stop(current)
    run_id = start(plan)
    replicas = (args.replicas or 1) if args.kind == "rayservice" else 1
    _write_index(args.name, {**plan, "run_id": run_id, "replicas": replicas})
    echo(f"deployed local service {args.name} (kind={args.kind}, run={run_id}) on http://{HOST}:{plan['port']}")
    echo(f"track: tau serve status {args.name} --local --kind {args.kind}")


def start(plan: dict[str, Any]) -> str:
    """Register a local run for ``plan`` and start its supervisor; returns the run id."""
    from tau_core.backends.local.registry import create_run_dir, now_iso
    from tau_core.fsutil import write_json_atomic

    paths = _paths()
    run_id = str(paths.new_run_id(f"serve-{plan['name']}"))
    run = create_run_dir(run_id)
    output = Path(paths.data_root()) / "serve" / run_id
    argv = [str(run.path) if a == RUN_DIR else a for a in plan["argv"]]
    request = {"schema": "tau.local.request.v1", "run_id": run_id, "name": f"serve-{plan['name']}", "engine": "job",
               "argv": argv, "entrypoint": argv[0], "cwd": plan["cwd"], "config_path": None,
               "config_hash": "", "submission_id": run_id, "env": {**plan["env"], "TAU_OUTPUT_DIR": str(output)},
               "memory_limit": None, "output_dir": str(output), "checkpoint_path": str(output / "checkpoints"),
               "staged": False, "staging_root": str(output / "staging"), "history": [],
               "experiment": {"project": "serve", "name": "", "group": "default"}, "ray": None,
               "retry": {"max_retries": 0, "retry_on": [], "backoff_initial": 30.0, "backoff_max": 300.0}}
    write_json_atomic(run.request_file, request, mode=0o600, durable=True)
    created = now_iso()
    write_json_atomic(run.run_file, {
        "schema": "tau.local.run.v1", "run_id": run_id, "name": request["name"], "engine": "job",
        "created_at": created, "updated_at": created, "state": "Submitted",
        "transitions": [{"state": "Submitted", "at": created, "detail": f"registered in {run.path}"}],
        "config_path": None, "config_hash": "", "submission_id": run_id, "output_dir": str(output),
        "cwd": plan["cwd"], "log_path": str(run.log_file), "attempts": [], "max_attempts": 1, "memory_limit": None,
        "history": [], "pending": {"attempt": 1}})
    run.log_file.touch()
    with open(run.supervisor_log, "ab") as log:
        subprocess.Popen([sys.executable, "-m", "tau_core.backends.local.supervisor", str(run.path)],
                         stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, cwd=str(run.path),
                         start_new_session=True, close_fds=True)
    return run_id


def _backend() -> Any:
    from tau_core.lifecycle.base import get_backend

    return get_backend("local")


def _ref(run_id: str) -> Any:
    from tau_core.lifecycle.base import RunRef

    return RunRef(name=run_id, backend="local")


def _alive(entry: dict[str, Any]) -> bool:
    """Whether the service's supervised run is still going."""
    try:
        return not _backend().status(_ref(str(entry["run_id"]))).terminal
    except NotFoundError:
        return False


def run_dir(entry: dict[str, Any]) -> Path:
    return Path(_paths().runs_root()) / str(entry["run_id"])


def _stop(entry: dict[str, Any]) -> None:
    try:
        _backend().cancel(_ref(str(entry["run_id"])), wait=True, timeout=60.0)
    except NotFoundError:
        pass
    if entry.get("kind") == "rayservice":  # whatever a killed service process left of its Ray head
        from tau_core.backends.local import ray as local_ray
        from tau_serve.ray_local import read_head

        local_ray.clean_up_after(run_dir(entry), read_head(run_dir(entry)) or {})


def listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex((HOST, port)) == 0


def require(name: str) -> dict[str, Any]:
    entry = read_index(name)
    if entry is None:
        raise NotFoundError(f"no local service named {name}",
                            hint=f"deploy it with tau serve deploy {name} --local --kind deployment --command ...")
    return entry


def local_status(name: str) -> dict[str, Any]:
    entry = require(name)
    running = _alive(entry) if entry.get("replicas", 1) else False
    ready = running and listening(int(entry["port"]))
    ready_replicas = 1 if ready else 0
    application = None
    if entry["kind"] == "rayservice" and running:
        application, ready_replicas = _serve_application(entry)
        ready = ready and application == "RUNNING"
    phase = "Ready" if ready else ("Starting" if running else ("ScaledToZero" if not entry.get("replicas", 1)
                                                              else "Stopped"))
    result = {"name": name, "kind": entry["kind"], "phase": phase, "ready": ready, "run": entry["run_id"],
              "url": f"http://{HOST}:{entry['port']}", "desired": int(entry.get("replicas", 1)),
              "ready_replicas": ready_replicas}
    if entry["kind"] == "rayservice":
        result["application"] = application
    return result


def _serve_application(entry: dict[str, Any]) -> tuple[str | None, int]:
    """The Serve application's status on the service's head and its RUNNING replicas (None before it exists)."""
    from tau_serve import ray_local

    head = ray_local.read_head(run_dir(entry))
    if head is None:
        return None, 0
    try:
        app = ray_local.application(head)
    except (OSError, ValueError):
        return None, 0
    replicas = [r for d in (app.get("deployments") or {}).values() for r in d.get("replicas") or []]
    return app.get("status"), len([r for r in replicas if r.get("state") == "RUNNING"])


def local_scale(name: str, replicas: int) -> None:
    entry = require(name)
    rayservice = entry["kind"] == "rayservice"
    if replicas > 1 and not rayservice:
        raise UsageError(f"--replicas {replicas}: a local service runs one process on one port (use 0 or 1)")
    if rayservice and replicas:
        argv = list(entry["argv"])
        argv[argv.index("--replicas") + 1] = str(replicas)
        entry["argv"] = argv
    if replicas == 0:
        _stop(entry)
    elif not _alive(entry):
        plan = {k: v for k, v in entry.items() if k not in ("run_id", "replicas")}
        entry["run_id"] = start(plan)
    elif rayservice:
        _scale_serve(entry, replicas)
    _write_index(name, {**entry, "replicas": replicas})
    echo(f"scaled local service {name} to {replicas} replica(s)")


def _scale_serve(entry: dict[str, Any], replicas: int) -> None:
    """num_replicas of every deployment, through the head's Serve API (what a cluster scale patches)."""
    from tau_core.errors import TauError
    from tau_serve import ray_local

    head = ray_local.read_head(run_dir(entry))
    if head is None or head.get("config") is None:
        raise TauError(f"local service {entry['name']} is still starting: its Serve application is not deployed yet",
                       hint=f"wait for it: tau serve status {entry['name']} --local --watch")
    if replicas > int(head["num_cpus"]) - 1:
        raise UsageError(f"--replicas {replicas}: the local Ray head of {entry['name']} has room for "
                         f"{int(head['num_cpus']) - 1} replicas",
                         hint=f"redeploy with --replicas {replicas} (the head is sized for it)")
    try:
        ray_local.scale(head, replicas)
    except (OSError, ValueError) as exc:
        raise TauError(f"the local Ray head of {entry['name']} refused the scale: {exc}",
                       hint=f"read its log: tau logs {entry['run_id']}") from None
    ray_local.write_head(run_dir(entry), head)


def local_delete(name: str) -> None:
    entry = read_index(name)
    if entry is None:
        echo(f"local service {name} was already gone")
        return
    _stop(entry)
    index_file(name).unlink(missing_ok=True)
    echo(f"deleted local service {name} (run {entry['run_id']})")
