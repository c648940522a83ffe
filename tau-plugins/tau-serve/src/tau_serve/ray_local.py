"""``tau serve deploy NAME --local --kind rayservice``: a Serve application on a real local Ray head.

The service is a local run (see :mod:`tau_serve.local`) whose process is this module::

    python -m tau_serve.ray_local --run-dir RUN_DIR --import-path mod:app --port PORT --replicas N

It owns one Ray head, started like a RayJob run's head (:func:`tau_core.backends.local.ray.start_head`:
127.0.0.1, token authentication with the token 0600 in the run directory, a short temp root, free ports,
gone with this process even on ``kill -9``).  It then applies the same Serve config a cluster RayService
carries in ``serveConfigV2`` (one application ``default`` on route ``/``) through the dashboard's Serve REST
API, with the HTTP proxy on ``127.0.0.1:PORT``.  The project directory (the deploy's working directory)
is on the head's ``PYTHONPATH``, so the replicas import ``--import-path`` from it.

What it started is recorded in ``RUN_DIR/serve-head.json`` (dashboard, temp root, Serve config; never the
token); ``status``/``scale --local`` read it.  On SIGTERM (``delete``, ``scale --replicas 0``) it stops
the head and removes its temp root.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

APP = "default"
HEAD_FILE = "serve-head.json"
APPLY_TIMEOUT = 180.0
APPLICATIONS = "/api/serve/applications/"


def head_cpus(replicas: int) -> int:
    """Logical CPUs the head advertises: room for the replicas (one CPU each) on any machine."""
    return max(os.cpu_count() or 1, 2 * max(replicas, 1), 4)


def serve_config(import_path: str, port: int, app_args: Mapping[str, Any] | None = None,
                 deployments: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The Serve config (what a cluster RayService carries in ``serveConfigV2``), bound to 127.0.0.1."""
    app: dict[str, Any] = {"name": APP, "route_prefix": "/", "import_path": import_path}
    if app_args:
        app["args"] = dict(app_args)
    if deployments:
        app["deployments"] = [{"name": n, "num_replicas": r} for n, r in sorted(deployments.items())]
    return {"http_options": {"host": "127.0.0.1", "port": port}, "applications": [app]}


# -- the dashboard's Serve REST API ------------------------------------------------------------------------


def _request(record: Mapping[str, Any], method: str, body: Any = None, timeout: float = 10.0) -> Any:
    token = Path(str(record["token_file"])).read_text().strip()
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(f"{record['dashboard']}{APPLICATIONS}", data=data, method=method,
                                 headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        text = resp.read().decode() or "null"
    return json.loads(text)


def application(record: Mapping[str, Any]) -> dict[str, Any]:
    """The ``default`` application's details (status, message, deployments), {} before it exists."""
    details = _request(record, "GET") or {}
    app = (details.get("applications") or {}).get(APP)
    return dict(app) if isinstance(app, dict) else {}


def apply(record: dict[str, Any], config: dict[str, Any]) -> None:
    _request(record, "PUT", config, timeout=30.0)
    record["config"] = config


def shutdown(record: Mapping[str, Any]) -> None:
    """Remove every Serve application and the proxy from the head (the head stays)."""
    _request(record, "DELETE", timeout=60.0)


def wait_running(record: Mapping[str, Any], alive: Any, say: Any, timeout: float = APPLY_TIMEOUT) -> dict[str, Any]:
    """Poll the application until RUNNING; a RuntimeError naming Serve's message when it cannot deploy."""
    deadline = time.monotonic() + timeout
    last = ""
    while time.monotonic() < deadline:
        if not alive():
            raise RuntimeError("the local Ray head exited while the Serve application deployed")
        try:
            app = application(record)
        except (OSError, ValueError):
            app = {}
        status = str(app.get("status") or "")
        if status and status != last:
            last = status
            say(f"Serve application {APP}: {status}")
        if status == "RUNNING":
            return app
        if status in ("DEPLOY_FAILED", "UNHEALTHY"):
            message = str(app.get("message") or "").strip().splitlines()
            raise RuntimeError(f"the Serve application failed to deploy ({status}): "
                               f"{message[-1] if message else 'no message'}")
        time.sleep(0.5)
    raise RuntimeError(f"the Serve application was not RUNNING within {timeout:.0f}s (last status {last or 'none'})")


def deployment_names(record: Mapping[str, Any]) -> list[str]:
    return sorted((application(record).get("deployments") or {}).keys())


def scale(record: dict[str, Any], replicas: int) -> None:
    """Set ``num_replicas`` of every deployment of the application (as a cluster scale patches serveConfigV2)."""
    config = json.loads(json.dumps(record["config"]))
    app = config["applications"][0]
    app["deployments"] = [{"name": n, "num_replicas": replicas} for n in deployment_names(record)]
    apply(record, config)


def read_head(run_dir: Path) -> dict[str, Any] | None:
    path = run_dir / HEAD_FILE
    if not path.is_file():
        return None
    data = json.loads(path.read_text(encoding="utf-8"))
    return data if isinstance(data, dict) else None


def write_head(run_dir: Path, record: Mapping[str, Any]) -> None:
    from tau_core.fsutil import write_json_atomic

    write_json_atomic(run_dir / HEAD_FILE, dict(record), mode=0o600)


# -- the service process -----------------------------------------------------------------------------------


def _say(text: str) -> None:
    print(f"[serve] {text}", flush=True)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m tau_serve.ray_local")
    parser.add_argument("--run-dir", required=True, type=Path)
    parser.add_argument("--import-path", required=True)
    parser.add_argument("--port", required=True, type=int)
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--app-args", default="")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from tau_core.backends.local import ray as local_ray

    opts = _parse(argv)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    cwd = os.getcwd()  # the project: the replicas import --import-path from it
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (cwd, os.environ.get("PYTHONPATH")) if p)
    try:
        head = local_ray.start_head(opts.run_dir, head_cpus(opts.replicas), _say, stop.is_set)
    except (RuntimeError, local_ray.HeadStartCancelled) as exc:
        _say(str(exc))
        return 0 if stop.is_set() else 1
    record: dict[str, Any] = {**head.record(), "port": opts.port, "config": None}
    try:
        return _serve(opts, head, record, stop)
    finally:
        _say("stopping the local Ray head")
        local_ray.stop_head(head)


def _serve(opts: argparse.Namespace, head: Any, record: dict[str, Any], stop: threading.Event) -> int:
    alive = lambda: head.alive() and not stop.is_set()  # noqa: E731
    try:
        apply(record, serve_config(opts.import_path, opts.port, json.loads(opts.app_args or "null")))
        write_head(opts.run_dir, record)
        app = wait_running(record, alive, _say)
        if opts.replicas != 1:
            scale(record, opts.replicas)
            write_head(opts.run_dir, record)
            app = wait_running(record, alive, _say)
    except (OSError, ValueError, RuntimeError) as exc:
        if stop.is_set():
            return 0
        _say(f"error: {exc}")
        return 1
    _say(f"application {APP} RUNNING on http://127.0.0.1:{opts.port}/ "
         f"(deployments: {', '.join(sorted(app.get('deployments') or {}))})")
    while not stop.wait(1.0):
        if not head.alive():
            _say("the local Ray head exited")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
