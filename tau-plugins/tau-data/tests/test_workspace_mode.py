"""Workspace mode: register/ingest as a Job in the workspace namespace of the simulated TauGrid cluster.

Proven only against the simulator: the Job is created, admitted by the simulated Kueue, run by the
simulated Job controller and its pod's log read back through the real API; the worker itself runs when
the simulator produces that pod's log, by calling the hidden worker's code in this process with the
environment the Job gave the pod (no container image is pulled or executed).
"""

from __future__ import annotations

import json
import threading

import pytest

from tau_testing.sim.scenarios.taugrid import NAMESPACE
from tau_testing.sim.scripts import PodScript, scripts_of

DEV_ACCOUNT = "devstoreaccount1"

IMAGE = "ghcr.io/acme/tau@sha256:" + "a" * 64


class WorkerPod:
    """Runs the hidden worker for a simulated pod, once, from the pod's own args and environment."""

    def __init__(self) -> None:
        self.done: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def __call__(self, pod, container):  # type: ignore[no-untyped-def]
        from tau_data.workers import ingest_worker_run, register_worker_run, status_worker_run
        from tau_data.workspace_mode import ENV_RECORD, RESULT

        uid = pod["metadata"].get("uid") or pod["metadata"]["name"]
        with self.lock:
            if uid in self.done:
                return self.done[uid]
            spec = pod["spec"]["containers"][0]
            env = {e["name"]: e.get("value", "") for e in spec.get("env", [])}
            args = spec["args"]
            registry = args[args.index("--registry") + 1]
            if args[1] == "register-worker":
                result = register_worker_run(env[ENV_RECORD], registry)
            elif args[1] == "status-worker":
                result = status_worker_run(registry, args[-1])
            else:
                result = ingest_worker_run(env[ENV_RECORD], registry, args[args.index("--source-root") + 1])
            self.done[uid] = [RESULT + json.dumps(result)]
            return self.done[uid]


@pytest.fixture
def workspace(taugrid_factory, az_registry, tau_env):  # type: ignore[no-untyped-def]
    scenario = taugrid_factory(clock="real", time_scale=20)
    scripts_of(scenario.cluster).add({"app": "tau-dataset"}, PodScript(run_seconds=1, logs=WorkerPod()))
    tau_env["TAU_DATA_JOB_TIMEOUT"] = "120"
    return scenario, az_registry


def test_workspace_register_runs_a_job_and_is_idempotent(tau_cli, workspace, dataset_dir):  # type: ignore[no-untyped-def]
    scenario, registry = workspace
    args = ("data", "dataset", "register", "web@1.0", "--registry", registry, "--purpose", "pretrain",
            "--from", str(dataset_dir), "--workspace", "aurora", "--worker-image", IMAGE)
    no_wait = tau_cli(*args)
    assert no_wait.exit_code == 2 and "requires --wait" in no_wait.stderr
    tag = tau_cli(*args[:-1], "ghcr.io/acme/tau:latest", "--wait")
    assert tag.exit_code == 2 and "must be digest-pinned" in tag.stderr
    first = tau_cli(*args, "--wait")
    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("registered web@1.0 (digest sha256:")
    again = tau_cli(*args, "--wait")
    assert again.exit_code == 0 and "identical digest" in again.stdout and "idempotent no-op" in again.stdout
    jobs = scenario.cluster.store.list("batch/v1", "Job", NAMESPACE)
    assert len(jobs) == 2 and all(j["spec"]["template"]["spec"]["containers"][0]["image"] == IMAGE for j in jobs)
    assert all(j["metadata"]["labels"]["kueue.x-k8s.io/queue-name"] == "jobqueue" for j in jobs)
    shown = json.loads(tau_cli("data", "dataset", "show", "web@1.0", "--registry", registry, "-o", "json").stdout)
    assert shown["assurance"] == "verified" and len(shown["files"]) == 3


def test_workspace_ingest_copies_into_azure(tau_cli, workspace, dataset_dir, tmp_path):  # type: ignore[no-untyped-def]
    _scenario, registry = workspace
    files = []
    for path in sorted(p for p in dataset_dir.rglob("*") if p.is_file()):
        import hashlib

        files.append({"path": path.relative_to(dataset_dir).as_posix(), "bytes": path.stat().st_size,
                      "sha256": hashlib.sha256(path.read_bytes()).hexdigest()})
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps({"files": files}))
    container = registry.split("/")[3]
    assert tau_cli("data", "dataset", "register", "web@2.0", "--registry", registry, "--purpose", "pretrain",
                   "--manifest", str(manifest), "--account", DEV_ACCOUNT, "--container", container,
                   "--prefix", "bytes/web-2").exit_code == 0
    local = tau_cli("data", "dataset", "ingest", "web@2.0", "--registry", registry,
                    "--source-root", f"file://{dataset_dir}")
    assert local.exit_code == 2 and "local ingest mode requires a file:// destination" in local.stderr
    done = tau_cli("data", "dataset", "ingest", "web@2.0", "--registry", registry, "--source-root",
                   f"file://{dataset_dir}", "--workspace", "aurora", "--worker-image", IMAGE, "--wait", "-o", "json")
    assert done.exit_code == 0, done
    assert json.loads(done.stdout)["status"]["state"] == "ready"
    status = json.loads(tau_cli("data", "dataset", "status", "web@2.0", "--registry", registry, "-o", "json").stdout)
    assert status["state"] == "ready" and status["verified_files"] == 3
    remote = tau_cli("data", "dataset", "status", "web@2.0", "--registry", registry, "--workspace", "aurora",
                     "--worker-image", IMAGE, "-o", "json")
    assert remote.exit_code == 0, remote.stderr
    assert json.loads(remote.stdout)["attempt_id"] == status["attempt_id"]
    verify = tau_cli("data", "dataset", "verify", "web@2.0", "--registry", registry)
    assert verify.exit_code == 0 and "web@2.0: OK" in verify.stdout


@pytest.fixture
def https_root(tmp_path, dataset_dir, monkeypatch):  # type: ignore[no-untyped-def]
    """A local HTTPS server (self-signed certificate, trusted through SSL_CERT_FILE) serving dataset_dir."""
    import functools
    import http.server
    import ssl
    import subprocess

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1",
                    "-addext", "subjectAltName=IP:127.0.0.1", "-keyout", str(key), "-out", str(cert)],
                   check=True, capture_output=True)
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(dataset_dir))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))
    yield f"https://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_workspace_ingest_from_https(tau_cli, workspace, dataset_dir, https_root):  # type: ignore[no-untyped-def]
    _scenario, registry = workspace
    container = registry.split("/")[3]
    register = tau_cli("data", "dataset", "register", "web@3.0", "--registry", registry, "--purpose", "pretrain",
                       "--from", str(dataset_dir), "--account", DEV_ACCOUNT, "--container", container,
                       "--prefix", "bytes/web-3")
    assert register.exit_code == 0, register.stderr
    local = tau_cli("data", "dataset", "ingest", "web@3.0", "--registry", registry, "--source-root", https_root)
    assert local.exit_code == 2 and "--workspace is required for az:// or https:// sources" in local.stderr
    done = tau_cli("data", "dataset", "ingest", "web@3.0", "--registry", registry, "--source-root", https_root,
                   "--workspace", "aurora", "--worker-image", IMAGE, "--wait", "-o", "json")
    assert done.exit_code == 0, done.stderr
    assert json.loads(done.stdout)["status"]["verified_files"] == 3
    assert tau_cli("data", "dataset", "verify", "web@3.0", "--registry", registry).exit_code == 0
