"""Fixtures for the Portal tests: the Portal's read-only identity, workload objects, a served Portal.

Under --import-mode=importlib test modules cannot import each other; helpers are handed out as fixtures."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ruamel.yaml import YAML

from tau_core import keys
from tau_testing.paths import repo_root
from tau_testing.sim.scenarios.taugrid import NAMESPACE, QUEUE, TauGridScenario
from tau_testing.sim.scripts import PodScript
from taugrid_portal.portal.app import create_app
from taugrid_portal.portal.config import OperatorScope, PortalConfig

PORTAL_USER = "system:serviceaccount:tau-system:tau-portal"
RBAC_FILE = repo_root() / "deploy" / "portal" / "rbac.yaml"


def rbac_objects() -> list[dict[str, Any]]:
    return [d for d in YAML(typ="safe", pure=True).load_all(RBAC_FILE.read_text()) if d]


def portal_kubeconfig(cluster: Any, tmp: Path) -> Path:
    """A kubeconfig for the Portal's ServiceAccount, bound to exactly the read-only ClusterRole."""
    for obj in rbac_objects():
        cluster.apply(obj)
    if PORTAL_USER not in cluster.users:
        cluster.add_user(PORTAL_USER, ["system:serviceaccounts", "system:serviceaccounts:tau-system"])
    tmp.mkdir(parents=True, exist_ok=True)
    return cluster.write_kubeconfig(tmp / "portal-kubeconfig", user=PORTAL_USER)


def job(name: str, *, gpus: int = 0, labels: dict[str, str] | None = None, tau: bool = True,
        annotations: dict[str, str] | None = None, namespace: str = NAMESPACE) -> dict[str, Any]:
    meta_labels = {keys.KUEUE_QUEUE_NAME: QUEUE, **({keys.MANAGED_BY: keys.MANAGED_BY_VALUE} if tau else {}),
                   **(labels or {})}
    requests: dict[str, Any] = {"cpu": "100m"}
    spec: dict[str, Any] = {"restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "ghcr.io/acme/t:1",
                                            "resources": {"requests": requests}}]}
    if gpus:
        requests[keys.NVIDIA_GPU] = str(gpus)
        spec["containers"][0]["resources"]["limits"] = {keys.NVIDIA_GPU: str(gpus)}
        spec["tolerations"] = [{"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels,
                         "annotations": dict(annotations or {})},
            "spec": {"suspend": True, "backoffLimit": 0, "template": {"metadata": {"labels": {}}, "spec": spec}}}


class Served:
    def __init__(self, url: str, app: Any) -> None:
        self.url = url
        self.app = app
        self.client = httpx.Client(base_url=url, timeout=20)

    def get(self, path: str, **kwargs: Any) -> httpx.Response:
        return self.client.get(path, **kwargs)

    def wait(self, path: str, predicate: Any, timeout: float = 20.0, **kwargs: Any) -> httpx.Response:
        deadline = time.monotonic() + timeout
        while True:
            r = self.get(path, **kwargs)
            if predicate(r):
                return r
            if time.monotonic() > deadline:
                raise AssertionError(f"{path} never matched; last answer {r.status_code} {r.text[:400]}")
            time.sleep(0.05)


def serve(app: Any) -> Iterator[Served]:
    import uvicorn

    from taugrid_portal.stellar.server import bind, url_for

    sock = bind("127.0.0.1", 0)
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the Portal test server did not start")
        time.sleep(0.02)
    served = Served(url_for(sock), app)
    try:
        yield served
    finally:
        served.client.close()
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


XSS = "<img src=x onerror=alert(1)>"


def make_portal(sim: Any, tmp: Path, /, **overrides: Any) -> Iterator[Served]:
    tmp.mkdir(parents=True, exist_ok=True)
    kubeconfig = portal_kubeconfig(sim, tmp)
    app_options = {k: overrides.pop(k) for k in ("directory", "ray_upstream", "kueueviz_upstream", "cache_options") if k in overrides}
    config = PortalConfig(kubeconfig=str(kubeconfig), refresh_seconds=0.5, **overrides)
    yield from serve(create_app(config, **app_options))


@pytest.fixture
def portal(taugrid_cluster: TauGridScenario, tmp_path: Path) -> Iterator[Served]:
    yield from make_portal(taugrid_cluster.cluster, tmp_path, jobs_scope_mode="operator",
                           operator_scopes=(OperatorScope("aurora", NAMESPACE, QUEUE),))


def ready(r: Any) -> bool:
    return r.status_code == 200


def populate(scenario: TauGridScenario) -> None:
    """Runs in every state: running, pending on quota, failed, retried, external, a RayJob and its submitter."""
    cluster = scenario.cluster
    from tau_testing.sim.scripts import ScriptBook

    book = cluster.scripts if cluster.scripts is not None else ScriptBook()
    cluster.scripts = book
    book.add("^fails-", PodScript(run_seconds=1, exit_code=1, logs=["starting", XSS, "boom"]))
    book.add("^runs-", PodScript(run_seconds=None, logs=["epoch 1", XSS]))
    cluster.store.create(job("runs-1", labels={keys.RUN_ID: "r-1"}))
    cluster.store.create(job("fails-1"))
    cluster.store.create(job("runs-retried", annotations={keys.RETRY_ATTEMPT: "2", keys.RETRY_MAX: "3"}))
    cluster.store.create(job("waits-gpu", gpus=64))  # more GPUs than the queue's quota: pending on quota
    cluster.store.create(job("external-1", tau=False))
    cluster.store.create(job(f"xss-{len(XSS)}", labels={keys.STELLAR_EXPERIMENT: "exp"},
                             annotations={"note": XSS, keys.STELLAR_EXPERIMENT_ID: "exp&workspace=elsewhere#x"}))
    cluster.store.create({"apiVersion": "ray.io/v1", "kind": "RayJob",
                          "metadata": {"name": "ray-1", "namespace": NAMESPACE,
                                       "labels": {keys.MANAGED_BY: keys.MANAGED_BY_VALUE,
                                                  keys.KUEUE_QUEUE_NAME: QUEUE}},
                          "spec": {"entrypoint": "python train.py", "suspend": True,
                                   "rayClusterSpec": {"headGroupSpec": {"rayStartParams": {}, "template": {
                                       "spec": {"containers": [{"name": "head", "image": "rayproject/ray:2.9",
                                                                "resources": {"requests": {"cpu": "1"}}}]}}},
                                       "workerGroupSpecs": []}}})
    cluster.settle()
    cluster.advance(5)
    cluster.settle()




@pytest.fixture
def make_job() -> Any:
    return job


@pytest.fixture
def populated(taugrid_cluster: TauGridScenario) -> TauGridScenario:
    populate(taugrid_cluster)
    return taugrid_cluster


@pytest.fixture
def portal_factory(tmp_path: Path) -> Iterator[Any]:
    """``portal_factory(cluster, **config)``: another served Portal (stopped after the test)."""
    stack: list[Iterator[Served]] = []

    def make(sim: Any, /, **overrides: Any) -> Served:  # positional: ``cluster=`` is a Portal setting
        gen = make_portal(sim, tmp_path / f"p{len(stack)}", **overrides)
        stack.append(gen)
        return next(gen)

    yield make
    for gen in stack:
        gen.close()


@pytest.fixture
def portal_identity(taugrid_cluster: TauGridScenario, tmp_path: Path) -> tuple[Path, list[dict[str, Any]]]:
    """The Portal's kubeconfig (bound to deploy/portal/rbac.yaml only) and the manifest's objects."""
    return portal_kubeconfig(taugrid_cluster.cluster, tmp_path / "identity"), rbac_objects()
