"""Small builders for tests against the simulated cluster: Kueue queues and the manifests that use them.

Example::

    cluster = SimCluster(clock="fake")
    install_default_controllers(cluster)
    add_node(cluster, "node-1", cpu="8", memory="32Gi")
    kit.queue_setup(cluster, namespace="team", flavors=[kit.Flavor("default-flavor", {"cpu": "4"})])
    cluster.store.create(kit.job("train", "team", queue="lq", cpu="2"))
    cluster.advance(5)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from tau_testing.sim.controllers.kueue import API, PRIORITY_LABEL, QUEUE_LABEL


@dataclass
class Flavor:
    """A ResourceFlavor with its nominal quota in one ClusterQueue."""

    name: str
    quota: dict[str, str | int]
    node_labels: dict[str, str] = field(default_factory=dict)
    tolerations: list[dict[str, Any]] = field(default_factory=list)
    node_taints: list[dict[str, Any]] = field(default_factory=list)


def queue_setup(cluster: Any, *, namespace: str = "team", local_queue: str = "lq", cluster_queue: str = "cq",
                flavors: list[Flavor] | None = None, namespace_selector: dict[str, Any] | None = None,
                queueing_strategy: str = "BestEffortFIFO", preemption: dict[str, Any] | None = None,
                priority_classes: dict[str, int] | None = None) -> dict[str, Any]:
    """Create a namespace, ResourceFlavors, one ClusterQueue (one resource group per flavor set) and a
    LocalQueue pointing at it. Resources a flavor names go into one group covering all of them."""
    store = cluster.store
    if store.get("v1", "Namespace", None, namespace) is None:
        store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    flavors = flavors or [Flavor("default-flavor", {"cpu": "8", "memory": "32Gi"})]
    covered: list[str] = []
    for flavor in flavors:
        for res in flavor.quota:
            if res not in covered:
                covered.append(res)
        if store.get(API, "ResourceFlavor", None, flavor.name) is None:
            spec: dict[str, Any] = {}
            if flavor.node_labels:
                spec["nodeLabels"] = dict(flavor.node_labels)
            if flavor.tolerations:
                spec["tolerations"] = list(flavor.tolerations)
            if flavor.node_taints:
                spec["nodeTaints"] = list(flavor.node_taints)
            store.create({"apiVersion": API, "kind": "ResourceFlavor", "metadata": {"name": flavor.name},
                          "spec": spec})
    group = {"coveredResources": covered,
             "flavors": [{"name": f.name, "resources": [{"name": r, "nominalQuota": str(f.quota.get(r, 0))}
                                                        for r in covered]} for f in flavors]}
    cq_spec: dict[str, Any] = {"namespaceSelector": {} if namespace_selector is None else namespace_selector,
                               "queueingStrategy": queueing_strategy, "resourceGroups": [group]}
    if preemption:
        cq_spec["preemption"] = preemption
    if store.get(API, "ClusterQueue", None, cluster_queue) is None:
        store.create({"apiVersion": API, "kind": "ClusterQueue", "metadata": {"name": cluster_queue},
                      "spec": cq_spec})
    store.create({"apiVersion": API, "kind": "LocalQueue",
                  "metadata": {"name": local_queue, "namespace": namespace},
                  "spec": {"clusterQueue": cluster_queue}})
    for name, value in (priority_classes or {}).items():
        store.create({"apiVersion": API, "kind": "WorkloadPriorityClass", "metadata": {"name": name},
                      "value": value})
    cluster.settle()
    return cast("dict[str, Any]", store.get(API, "ClusterQueue", None, cluster_queue))


def _resources(cpu: str | None, memory: str | None, gpu: int) -> dict[str, Any]:
    requests: dict[str, Any] = {}
    if cpu:
        requests["cpu"] = cpu
    if memory:
        requests["memory"] = memory
    resources: dict[str, Any] = {"requests": requests}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
        resources["limits"] = {"nvidia.com/gpu": str(gpu)}
    return resources


def job(name: str, namespace: str = "team", *, queue: str | None = "lq", cpu: str = "1", memory: str = "1Gi",
        gpu: int = 0, image: str = "busybox:1.36", parallelism: int | None = None, completions: int | None = None,
        indexed: bool = False, backoff_limit: int | None = None, ttl_seconds_after_finished: int | None = None,
        active_deadline_seconds: int | None = None, priority_class: str | None = None,
        labels: dict[str, str] | None = None, node_selector: dict[str, str] | None = None,
        init_containers: list[dict[str, Any]] | None = None, restart_policy: str = "Never",
        suspend: bool | None = None) -> dict[str, Any]:
    """A batch/v1 Job manifest with one ``main`` container."""
    meta_labels = dict(labels or {})
    if queue:
        meta_labels[QUEUE_LABEL] = queue
    if priority_class:
        meta_labels[PRIORITY_LABEL] = priority_class
    pod_spec: dict[str, Any] = {"restartPolicy": restart_policy,
                                "containers": [{"name": "main", "image": image,
                                                "resources": _resources(cpu, memory, gpu)}]}
    if node_selector:
        pod_spec["nodeSelector"] = dict(node_selector)
    if init_containers:
        pod_spec["initContainers"] = init_containers
    spec: dict[str, Any] = {"template": {"metadata": {"labels": dict(labels or {})}, "spec": pod_spec}}
    for key, value in (("parallelism", parallelism), ("completions", completions), ("backoffLimit", backoff_limit),
                       ("ttlSecondsAfterFinished", ttl_seconds_after_finished),
                       ("activeDeadlineSeconds", active_deadline_seconds), ("suspend", suspend)):
        if value is not None:
            spec[key] = value
    if indexed:
        spec["completionMode"] = "Indexed"
    return {"apiVersion": "batch/v1", "kind": "Job",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels}, "spec": spec}


def ray_cluster_spec(*, workers: int = 1, head_cpu: str = "1", head_memory: str = "2Gi", worker_cpu: str = "1",
                     worker_memory: str = "2Gi", worker_gpu: int = 0, image: str = "rayproject/ray:2.40.0",
                     driver_log_sidecar: bool = True, group: str = "workers") -> dict[str, Any]:
    """A ``rayClusterSpec`` with a ``ray-head`` head (plus the ``ray-driver-log-offload`` sidecar TauGrid
    renders) and one worker group."""
    head_containers = [{"name": "ray-head", "image": image,
                        "ports": [{"name": "gcs-server", "containerPort": 6379},
                                  {"name": "dashboard", "containerPort": 8265},
                                  {"name": "client", "containerPort": 10001}],
                        "resources": _resources(head_cpu, head_memory, 0)}]
    if driver_log_sidecar:
        head_containers.append({"name": "ray-driver-log-offload", "image": image,
                                "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}}})
    spec: dict[str, Any] = {
        "rayVersion": "2.40.0",
        "headGroupSpec": {"rayStartParams": {"dashboard-host": "0.0.0.0"},
                          "template": {"spec": {"containers": head_containers}}},
        "workerGroupSpecs": [],
    }
    if workers:
        spec["workerGroupSpecs"].append({
            "groupName": group, "replicas": workers, "minReplicas": workers, "maxReplicas": workers,
            "rayStartParams": {},
            "template": {"spec": {"containers": [{"name": "ray-worker", "image": image,
                                                  "resources": _resources(worker_cpu, worker_memory, worker_gpu)}]}},
        })
    return spec


def rayjob(name: str, namespace: str = "team", *, queue: str | None = "lq", entrypoint: str = "python train.py",
           shutdown_after_job_finishes: bool = True, ttl_seconds_after_finished: int = 0,
           active_deadline_seconds: int | None = None, priority_class: str | None = None,
           **cluster: Any) -> dict[str, Any]:
    """A ray.io/v1 RayJob manifest (``cluster`` keywords go to :func:`ray_cluster_spec`)."""
    labels: dict[str, str] = {}
    if queue:
        labels[QUEUE_LABEL] = queue
    if priority_class:
        labels[PRIORITY_LABEL] = priority_class
    spec: dict[str, Any] = {"entrypoint": entrypoint, "shutdownAfterJobFinishes": shutdown_after_job_finishes,
                            "ttlSecondsAfterFinished": ttl_seconds_after_finished,
                            "rayClusterSpec": ray_cluster_spec(**cluster)}
    if active_deadline_seconds is not None:
        spec["activeDeadlineSeconds"] = active_deadline_seconds
    return {"apiVersion": "ray.io/v1", "kind": "RayJob",
            "metadata": {"name": name, "namespace": namespace, "labels": labels}, "spec": spec}


def rayservice(name: str, namespace: str = "team", *, queue: str | None = "lq", apps: tuple[str, ...] = ("default",),
               **cluster: Any) -> dict[str, Any]:
    """A ray.io/v1 RayService manifest serving ``apps`` (one deployment each)."""
    labels = {QUEUE_LABEL: queue} if queue else {}
    config = "applications:\n" + "".join(
        f"- name: {app}\n  route_prefix: /{'' if app == 'default' else app}\n  import_path: serve:app\n"
        f"  deployments:\n  - name: {app.capitalize()}Deployment\n    num_replicas: 1\n" for app in apps)
    cluster.setdefault("driver_log_sidecar", False)
    return {"apiVersion": "ray.io/v1", "kind": "RayService",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {"serveConfigV2": config, "rayClusterConfig": ray_cluster_spec(**cluster)}}


def deployment(name: str, namespace: str = "team", *, replicas: int = 1, queue: str | None = None, cpu: str = "500m",
               memory: str = "512Mi", image: str = "nginx:1.27") -> dict[str, Any]:
    """An apps/v1 Deployment manifest (``app: <name>`` selector, one ``main`` container)."""
    labels = {"app": name}
    meta_labels = dict(labels)
    if queue:
        meta_labels[QUEUE_LABEL] = queue
    return {"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": meta_labels},
            "spec": {"replicas": replicas, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": dict(labels)},
                                  "spec": {"containers": [{"name": "main", "image": image,
                                                           "resources": _resources(cpu, memory, 0)}]}}}}


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any] | None:
    """The condition of type ``ctype`` in ``obj['status']['conditions']``, or ``None``."""
    for cond in ((obj or {}).get("status") or {}).get("conditions") or []:
        if cond.get("type") == ctype:
            return cast("dict[str, Any]", cond)
    return None
