"""A test-time copy of the TauGrid umbrella chart whose upstream dependencies are local stand-ins.

Kueue and KubeRay come from their upstream chart repositories, which cannot be reached here. Tests
copy ``deploy/charts`` into a temporary directory, write two small stand-in charts named ``kueue``
(0.18.2) and ``kuberay-operator`` (1.6.2) -- each a ServiceAccount and a Deployment labelled the way the
upstream charts label them, marked ``taugrid.test/stand-in`` -- point the copy's dependencies at them
and run ``helm dependency build``. Nothing here is committed as if it were upstream.

    chart = build_test_umbrella(tmp_path, helm_bin)     # -> <tmp>/charts/taugrid, dependencies built
"""

from __future__ import annotations

import os
import runpy
import shutil
import subprocess
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tau_testing.paths import repo_root

STANDINS = {"kueue": ("0.18.2", "kueue-controller-manager"), "kuberay-operator": ("1.6.2", "kuberay-operator")}
_DEPLOYMENT = """apiVersion: v1
kind: ServiceAccount
metadata:
  name: {workload}
  namespace: {{{{ .Release.Namespace }}}}
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {workload}
  namespace: {{{{ .Release.Namespace }}}}
  labels:
    app.kubernetes.io/name: {name}
    app.kubernetes.io/instance: {{{{ .Release.Name }}}}
    app.kubernetes.io/managed-by: {{{{ .Release.Service }}}}
    helm.sh/chart: {name}-{version}
  annotations:
    taugrid.test/stand-in: "true"
spec:
  replicas: 1
  selector:
    matchLabels: {{app.kubernetes.io/name: {name}, app.kubernetes.io/instance: {{{{ .Release.Name }}}}}}
  template:
    metadata:
      labels: {{app.kubernetes.io/name: {name}, app.kubernetes.io/instance: {{{{ .Release.Name }}}}}}
    spec:
      serviceAccountName: {workload}
      containers:
        - name: manager
          image: registry.invalid/stand-in/{name}:{version}
"""


def helm_env(home: Path) -> dict[str, str]:
    """An environment that keeps Helm's cache, config and data under ``home``."""
    return {**os.environ, "HOME": str(home), "HELM_CACHE_HOME": str(home / ".cache" / "helm"),
            "HELM_CONFIG_HOME": str(home / ".config" / "helm"), "HELM_DATA_HOME": str(home / ".local" / "helm")}


#: The upstream CRD folder (under ``crds_dir()``) each stand-in can carry, as the upstream chart does.
STANDIN_CRDS = {"kueue": "kueue-v0.18.2", "kuberay-operator": "kuberay-v1.6.2"}


def write_standin(directory: Path, name: str, *, upstream_crds: bool = False) -> Path:
    """Write stand-in chart ``name``; with ``upstream_crds`` its ``crds/`` holds the upstream CRDs read from
    ``../shared/crds`` (for a cluster that starts without them, like ``tau-sim serve --bare-nodes``)."""
    version, workload = STANDINS[name]
    chart = directory / name
    (chart / "templates").mkdir(parents=True, exist_ok=True)
    if upstream_crds:
        from tau_testing.paths import crds_dir

        (chart / "crds").mkdir(exist_ok=True)
        for crd in sorted((crds_dir() / STANDIN_CRDS[name]).glob("*.yaml")):
            shutil.copyfile(crd, chart / "crds" / crd.name)
    (chart / "Chart.yaml").write_text(
        f"apiVersion: v2\nname: {name}\nversion: {version}\n"
        f"description: test stand-in for the upstream {name} chart (never published)\n")
    (chart / "values.yaml").write_text("{}\n")
    (chart / "templates" / "deployment.yaml").write_text(
        _DEPLOYMENT.format(name=name, version=version, workload=workload))
    return chart


def sync_controller_crds(chart: Path, crds: Path | None = None) -> list[Path]:
    """Run the repository's own CRD copy step (deploy/tools/sync_chart_crds.py) for ``chart``."""
    script = repo_root() / "deploy" / "tools" / "sync_chart_crds.py"
    sync = runpy.run_path(str(script))["sync"]
    return list(sync(chart, crds) if crds is not None else sync(chart))


def build_test_umbrella(dest: Path, helm: Path, *, deploy: Path | None = None, upstream_crds: bool = False) -> Path:
    """Copy ``deploy``'s charts (default: this checkout's) to ``dest/charts``, sync its CRDs into the controller
    chart, swap in the stand-ins (carrying the upstream CRDs when ``upstream_crds``) and build the umbrella's
    dependencies."""
    deploy = deploy or repo_root() / "deploy"
    charts = dest / "charts"
    shutil.copytree(deploy / "charts", charts, ignore=shutil.ignore_patterns("charts", "Chart.lock", "*.tgz", "crds"))
    sync_controller_crds(charts / "tau-core-controller", deploy / "crds")
    for name in STANDINS:
        write_standin(dest / "standins", name, upstream_crds=upstream_crds)
    chart_yaml = charts / "taugrid" / "Chart.yaml"
    text = chart_yaml.read_text()
    text = text.replace("oci://registry.k8s.io/kueue/charts", "file://../../standins/kueue")
    text = text.replace("https://ray-project.github.io/kuberay-helm/", "file://../../standins/kuberay-operator")
    chart_yaml.write_text(text)
    result = subprocess.run([str(helm), "dependency", "build", str(charts / "taugrid")], capture_output=True,
                            text=True, env=helm_env(dest), timeout=120, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"helm dependency build failed: {result.stderr or result.stdout}")
    return charts / "taugrid"


class DaemonSetStatus:
    """A test-side stand-in for the DaemonSet controller, which the simulator does not run.

    It schedules no pods: it reports every DaemonSet as observed with zero desired pods, which is what
    Kubernetes reports for a DaemonSet whose node affinity matches no node (the GPU-monitoring DaemonSets
    on a cluster without GPU nodes). Add it with ``cluster.add_controller("daemonsets", DaemonSetStatus())``.
    """

    def __init__(self) -> None:
        self.enabled = True

    def reconcile(self, cluster: object) -> bool:
        store = cluster.store  # type: ignore[attr-defined]
        changed = False
        for ds in store.list("apps/v1", "DaemonSet", None):
            generation = ds["metadata"].get("generation", 1)
            if (ds.get("status") or {}).get("observedGeneration") == generation:
                continue
            ds["status"] = {"observedGeneration": generation, "currentNumberScheduled": 0, "numberMisscheduled": 0,
                            "desiredNumberScheduled": 0, "numberReady": 0, "updatedNumberScheduled": 0,
                            "numberAvailable": 0}
            store.update_status(ds)
            changed = True
        return changed


class TauClusterStandIn:
    """A test-side stand-in for the Tau controller, for tests about the readers of its status.

    tests/e2e/test_install_with_controller.py runs the real controller (``DeploymentProcess``) instead.

    It writes the status the controller publishes for the singleton: the generation observed, phase Ready,
    NodesReady=True and every declared workload profile resolved and Ready, with the profileSetHash
    computed by tau_core. What it proves is that the readiness checks and the export read that status
    correctly, not that a controller produces it.
    """

    def __init__(self) -> None:
        self.enabled = True

    def reconcile(self, cluster: Any) -> bool:
        from tau_core.config.profiles import profile_set_hash
        from tau_testing.sim import ApiError

        try:
            tc = cluster.store.get("tau.azure.com/v1alpha1", "TauCluster", None, "cluster")
        except ApiError:  # the Tau CRDs are not installed yet
            return False
        if tc is None:
            return False
        generation = tc["metadata"].get("generation", 1)
        if (tc.get("status") or {}).get("observedGeneration") == generation:
            return False
        ready = {"status": "True", "observedGeneration": generation, "lastTransitionTime": "2026-01-01T00:00:00Z"}
        profiles = []
        for p in (tc.get("spec") or {}).get("workloadProfiles") or []:
            profiles.append({**p, "conditions": [{"type": "Ready", "reason": "WorkloadProfileReady",
                                                  "message": "resolved", **ready}]})
        hashable = [{k: v for k, v in p.items() if k != "conditions"} for p in profiles]
        tc["status"] = {
            "phase": "Ready", "observedGeneration": generation,
            "conditions": [{"type": "NodesReady", "reason": "NoMatchingNodes", "message": "no catalog node", **ready},
                           {"type": "WorkloadProfilesReady", "reason": "WorkloadProfilesReady",
                            "message": f"{len(profiles)} workload profiles resolved", **ready}],
            "workloadProfiles": {"observedGeneration": generation, "observed": len(profiles),
                                 "ready": len(profiles), "drifted": 0,
                                 "profileSetHash": profile_set_hash(list[Mapping[str, Any]](hashable)),
                                 "profiles": profiles},
        }
        cluster.store.update_status(tc)
        return True


def deploy_tree_at(revision: str, dest: Path) -> Path:
    """``deploy/`` as it was at a git ``revision`` of this repository (for upgrade tests), under ``dest``."""
    import io
    import tarfile

    archive = subprocess.run(["git", "-C", str(repo_root()), "archive", "--format=tar", revision, "deploy"],
                             capture_output=True, check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(dest, filter="data")
    return dest / "deploy"


def previous_chart_revision() -> str:
    """The newest commit before HEAD's chart state that changed deploy/charts (or the only one there is)."""
    log = subprocess.run(["git", "-C", str(repo_root()), "log", "--format=%H", "--", "deploy/charts"],
                         capture_output=True, text=True, check=True).stdout.split()
    if not log:
        raise RuntimeError("git history holds no version of deploy/charts (a shallow clone?)")
    return log[1] if len(log) > 1 else log[0]


class DeploymentProcess:
    """Run an installed Deployment's container as a local process, the way a kubelet would start its pod.

    The simulator runs no kubelet. A thread waits until ``namespace/name`` exists in the simulated store, then
    starts ``command`` followed by the container's own ``args`` (as Helm rendered them), with the ServiceAccount's
    identity (a kubeconfig for ``system:serviceaccount:<ns>:<serviceAccountName>``, so the chart's RBAC is what
    authorises it) and with ``bind_flags`` moved to loopback port 0. Call ``stop()`` when done.
    """

    def __init__(self, cluster: Any, namespace: str, name: str, command: list[str], workdir: Path, *,
                 bind_flags: tuple[str, ...] = ()) -> None:
        import threading

        self.cluster, self.namespace, self.name, self.command = cluster, namespace, name, command
        self.workdir, self.bind_flags = workdir, bind_flags
        self.process: subprocess.Popen[bytes] | None = None
        self.args: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._wait_and_start, daemon=True, name=f"pod-{name}")
        self._thread.start()

    def _wait_and_start(self) -> None:
        while not self._stop.wait(0.2):
            deployment = self.cluster.store.get("apps/v1", "Deployment", self.namespace, self.name)
            if deployment is not None:
                self._start(deployment)
                return

    def _start(self, deployment: dict[str, Any]) -> None:
        spec = deployment["spec"]["template"]["spec"]
        account = spec.get("serviceAccountName", "default")
        user = f"system:serviceaccount:{self.namespace}:{account}"
        if user not in self.cluster.users:
            self.cluster.add_user(user, ["system:serviceaccounts", f"system:serviceaccounts:{self.namespace}",
                                         "system:authenticated"])
        kubeconfig = self.cluster.write_kubeconfig(self.workdir / "kubeconfig", user=user)
        args = [str(a) for a in spec["containers"][0].get("args") or []]
        self.args = list(args)
        args = [f"{a.split('=', 1)[0]}=127.0.0.1:0" if a.split("=", 1)[0] in self.bind_flags else a for a in args]
        log = (self.workdir / "process.log").open("wb")
        self.process = subprocess.Popen([*self.command, *args, "--kubeconfig", str(kubeconfig)],
                                        stdout=log, stderr=subprocess.STDOUT, cwd=self.workdir)

    def log(self) -> str:
        path = self.workdir / "process.log"
        return path.read_text(errors="replace") if path.exists() else ""

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(5)
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
