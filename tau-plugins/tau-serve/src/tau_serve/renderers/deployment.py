"""The ``apps/v1`` Deployment renderer (reference run-config-and-rendering §3.10), with Kueue pod integration.

Objects, workload first: the Deployment (container ``main``, strategy ``Recreate``, selector ``app``,
``--init`` init containers and ``--sidecar`` containers, the HTTP probes, ``--command``/``--arg``);
a ClusterIP Service (port ``http``) when ``--service-port`` is given; an ``autoscaling/v2``
HorizontalPodAutoscaler (CPU 80%, plus the ``http_requests_per_second`` pods metric with
``--target-qps``) when ``--max-replicas`` asks for autoscaling; the Deployment then leaves
``spec.replicas`` to the autoscaler.
"""

from __future__ import annotations

from typing import Any

from tau_core import keys
from tau_core.errors import ConfigError
from tau_serve.renderers import common as c
from tau_serve.spec import ServeRenderRequest, ServeSpec

MAIN = "main"


def render_deployment(request: ServeRenderRequest) -> list[dict[str, Any]]:
    spec = request.spec
    prof = c.profile(request)
    if int(prof.get("workerCount") or 1) != 1:
        raise ConfigError(f'--kind=deployment requires a single-worker profile; "{prof.get("name")}" has '
                          f"workerCount {prof.get('workerCount')}", hint="choose a profile with workerCount 1, "
                          "or use --kind=rayservice")
    ns = c.namespace(request)
    labels = {"app": spec.name, **c.labels(request)}
    pod_labels = {**labels, keys.KUEUE_MANAGED: "true"}
    pod_annotations = {**c.pod_annotations(prof), keys.KUEUE_POD_SUSPENDING_PARENT: "deployment"}
    deployment: dict[str, Any] = {
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": spec.name, "namespace": ns, "labels": dict(sorted(labels.items())),
                     "annotations": c.stamps(request)},
        "spec": {"strategy": {"type": "Recreate"},
                 "selector": {"matchLabels": {"app": spec.name}},
                 "template": {"metadata": {"labels": dict(sorted(pod_labels.items())),
                                           "annotations": dict(sorted(pod_annotations.items()))},
                              "spec": _pod(request, prof)}},
    }
    if spec.autoscaling is None:  # with an HPA the autoscaler owns spec.replicas (a redeploy never resets it)
        deployment["spec"] = {"replicas": spec.replicas, **deployment["spec"]}
    out = [deployment]
    if spec.service_port:
        out.append(_service(spec, ns, labels))
    if spec.autoscaling is not None:
        out.append(_hpa(spec, ns, labels))
    return out


def target_port(spec: ServeSpec) -> int:
    return spec.service_target_port or (spec.deployment_ports[0] if spec.deployment_ports else spec.service_port)


def _pod(request: ServeRenderRequest, prof: dict[str, Any]) -> dict[str, Any]:
    spec = request.spec
    main: dict[str, Any] = {"name": MAIN, "image": spec.image}
    if spec.command:
        main["command"] = list(spec.command)
    if spec.args:
        main["args"] = list(spec.args)
    env = c.env(request)
    if env:
        main["env"] = env
    ports = list(spec.deployment_ports) or ([target_port(spec)] if spec.service_port else [])
    if ports:
        main["ports"] = [{"name": "http" if i == 0 else f"port-{p}", "containerPort": p} for i, p in enumerate(ports)]
    main.update(_probes(spec))
    main["resources"] = c.resources("1", "2Gi", spec.gpus)
    mounts = c.mounts(request)
    if mounts:
        main["volumeMounts"] = mounts
    pod: dict[str, Any] = {"containers": [main] + [_extra(request, s.name, s.image) for s in spec.sidecars]}
    if spec.inits:
        pod["initContainers"] = [_extra(request, i.name, i.image) for i in spec.inits]
    volumes = c.volumes(request)
    if volumes:
        pod["volumes"] = volumes
    _, tolerations = c.gpu_scheduling(spec.gpus)
    if tolerations:
        pod["tolerations"] = tolerations
    return c.finish_pod(pod, prof)


def _extra(request: ServeRenderRequest, name: str, image: str) -> dict[str, Any]:
    if name == MAIN:
        raise ConfigError(f'container name "{MAIN}" is reserved for the serving container',
                          hint="rename the --init/--sidecar container")
    container: dict[str, Any] = {"name": name, "image": image, "resources": c.resources("100m", "128Mi")}
    mounts = c.mounts(request)
    if mounts:
        container["volumeMounts"] = mounts
    return container


def _probes(spec: ServeSpec) -> dict[str, Any]:
    probes = spec.probes
    port = target_port(spec)
    out: dict[str, Any] = {}
    for key, path in (("readinessProbe", probes.readiness_path), ("livenessProbe", probes.liveness_path),
                      ("startupProbe", probes.startup_path)):
        if not path:
            continue
        probe: dict[str, Any] = {"httpGet": {"path": path, "port": port}}
        if key == "startupProbe" and probes.startup_failure_threshold:
            probe["failureThreshold"] = probes.startup_failure_threshold
        out[key] = probe
    return out


def _service(spec: ServeSpec, ns: str, labels: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": spec.name, "namespace": ns, "labels": dict(sorted(labels.items()))},
            "spec": {"type": "ClusterIP", "selector": {"app": spec.name},
                     "ports": [{"name": "http", "port": spec.service_port, "targetPort": target_port(spec),
                                "protocol": "TCP"}]}}


def _hpa(spec: ServeSpec, ns: str, labels: dict[str, str]) -> dict[str, Any]:
    auto = spec.autoscaling
    assert auto is not None
    metrics: list[dict[str, Any]] = [{"type": "Resource", "resource": {
        "name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}]
    if auto.target_qps:
        metrics.append({"type": "Pods", "pods": {"metric": {"name": "http_requests_per_second"},
                                                 "target": {"type": "AverageValue",
                                                            "averageValue": str(auto.target_qps)}}})
    return {"apiVersion": "autoscaling/v2", "kind": "HorizontalPodAutoscaler",
            "metadata": {"name": spec.name, "namespace": ns, "labels": dict(sorted(labels.items()))},
            "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": spec.name},
                     "minReplicas": auto.min_replicas, "maxReplicas": auto.max_replicas, "metrics": metrics,
                     "behavior": {"scaleDown": {"stabilizationWindowSeconds": auto.scale_down_delay}}}}
