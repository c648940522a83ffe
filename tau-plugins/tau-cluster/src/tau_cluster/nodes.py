"""``tau cluster validate nodes``: a privileged probe pod per GPU node reads nvidia-smi, NVLink, ECC and IB.

Each probe is pinned to its node, enters the host's namespaces with ``nsenter`` and prints ``key=value``
lines; the verdict per node is HEALTHY, DEGRADED (still passes), UNHEALTHY or UNKNOWN. Probe pods are
labelled ``app.kubernetes.io/managed-by=tau-validate`` and deleted afterwards.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from typing import Any

import attrs

from tau_core.errors import TauError
from tau_core.kube import KubeApiError, KubeSession, api_path

IMAGE = "mcr.microsoft.com/azurelinux/base/core:3.0"
NAMESPACE = "default"
GPU_LOOKING = ("Standard_NC", "Standard_ND", "Standard_NV")
PROBE = r"""
smi=$(nvidia-smi --list-gpus 2>/dev/null); echo "smi_rc=$?"; echo "gpu_count=$(printf '%s\n' "$smi" | grep -c '^GPU')"
echo "driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n1)"
echo "mig_mode=$(nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader 2>/dev/null | head -n1)"
echo "mig_instances=$(nvidia-smi mig -lgi 2>/dev/null | grep -c 'MIG')"
links=$(nvidia-smi nvlink --status 2>/dev/null); echo "nvlink_rc=$?"
echo "nvlink_inactive=$(printf '%s\n' "$links" | grep -c '<inactive>')"
echo "ecc_uncorrected=$(nvidia-smi --query-gpu=ecc.errors.uncorrected.aggregate.dram --format=csv,noheader,nounits \
  2>/dev/null | awk '{s+=$1} END {print s+0}')"
total=0; active=0
for f in /sys/class/infiniband/*/ports/*/state; do [ -e "$f" ] || continue; total=$((total+1));
  grep -q ACTIVE "$f" && active=$((active+1)); done
echo "ib_total=$total"; echo "ib_active=$active"
"""


@attrs.frozen
class NodeResult:
    node: str
    gpus: int
    source: str
    status: str
    nvlink: str = "-"
    ib: str = "-"
    ecc: str = "-"
    driver: str = "-"
    reason: str = ""


def gpu_source(node: dict[str, Any]) -> tuple[str, int]:
    """(source, schedulable GPU count) from allocatable: device-plugin, mig, or none."""
    alloc = (node.get("status") or {}).get("allocatable") or {}
    mig = sum(_int(v) for k, v in alloc.items() if k.startswith("nvidia.com/mig-"))
    plugin = sum(_int(v) for k, v in alloc.items() if k.startswith("nvidia.com/") and "mig-" not in k)
    if plugin:
        return "device-plugin", plugin
    if mig:
        return "mig", mig
    return "none", 0


def dra_gpus(slices: list[dict[str, Any]]) -> dict[str, int]:
    """GPUs per node published as DRA ResourceSlices by a GPU driver; MIG devices count once per parent."""
    found: dict[str, set[str]] = {}
    for rs in slices:
        spec = rs.get("spec") or {}
        driver = str(spec.get("driver", "")).lower()
        node = spec.get("nodeName")
        if not node or not ("gpu" in driver or "nvidia" in driver):
            continue
        for device in spec.get("devices") or []:
            attrs_ = ((device.get("basic") or device).get("attributes") or {})
            parent = (attrs_.get("parentUUID") or attrs_.get("uuid") or {}).get("string") or device.get("name")
            found.setdefault(node, set()).add(str(parent))
    return {node: len(devices) for node, devices in found.items()}


async def resource_slices(session: KubeSession) -> list[dict[str, Any]]:
    """ResourceSlices from the first served resource.k8s.io version; none when DRA is not served."""
    for version in ("v1", "v1beta2", "v1beta1"):
        try:
            return await session.list_items(api_path(f"resource.k8s.io/{version}", "resourceslices"))
        except KubeApiError as exc:
            if exc.status not in (404, 403):
                raise
    return []


def looks_like_gpu(node: dict[str, Any]) -> bool:
    labels = node["metadata"].get("labels") or {}
    return bool(labels.get("kubernetes.azure.com/accelerator") or labels.get("accelerator")
                or labels.get("tau.azure.com/gpu-class")
                or str(labels.get("node.kubernetes.io/instance-type", "")).startswith(GPU_LOOKING))


def _int(value: Any) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def parse_probe(text: str) -> dict[str, str]:
    found = {}
    for line in text.splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and key.replace("_", "").isalnum():
            found[key] = value.strip()
    return found


def verdict(node: str, gpus: int, source: str, probe: dict[str, str]) -> NodeResult:
    """Health from the probe's key=value lines (rules in the module docstring of the reference)."""
    if "smi_rc" not in probe:
        return NodeResult(node, gpus, source, "UNKNOWN", reason="the probe printed nothing")
    nvlink = "n/a" if probe.get("nvlink_rc") != "0" else f"{_int(probe.get('nvlink_inactive'))} inactive"
    ib = f"{_int(probe.get('ib_active'))}/{_int(probe.get('ib_total'))}"
    ecc, driver = str(_int(probe.get("ecc_uncorrected"))), probe.get("driver") or "-"
    fields = {"nvlink": nvlink, "ib": ib, "ecc": ecc, "driver": driver}
    seen = _int(probe.get("gpu_count"))
    if probe["smi_rc"] != "0":
        return NodeResult(node, gpus, source, "UNHEALTHY", **fields, reason="nvidia-smi failed")
    if probe.get("mig_mode", "").lower() == "enabled" and _int(probe.get("mig_instances")) == 0:
        return NodeResult(node, gpus, source, "UNHEALTHY", **fields, reason="MIG enabled with no instances")
    if source in ("device-plugin", "dra") and seen < gpus:
        return NodeResult(node, gpus, source, "UNHEALTHY", **fields, reason=f"nvidia-smi sees {seen} of {gpus}")
    if _int(probe.get("nvlink_inactive")):
        return NodeResult(node, gpus, source, "UNHEALTHY", **fields, reason="inactive NVLink links")
    degraded = probe.get("nvlink_rc") != "0" or _int(ecc) > 0 or \
        _int(probe.get("ib_active")) < _int(probe.get("ib_total"))
    return NodeResult(node, gpus, source, "DEGRADED" if degraded else "HEALTHY", **fields)


def probe_pod(node: str) -> dict[str, Any]:
    name = f"tau-validate-{node}"[:50].rstrip("-.") + "-" + secrets.token_hex(4)
    return {"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": NAMESPACE,
                         "labels": {"app.kubernetes.io/managed-by": "tau-validate"}},
            "spec": {"nodeName": node, "hostPID": True, "hostNetwork": True, "restartPolicy": "Never",
                     "tolerations": [{"operator": "Exists"}],
                     "containers": [{"name": "probe", "image": IMAGE,
                                     "command": ["nsenter", "-t", "1", "-m", "-u", "-i", "-n", "-p", "--",
                                                 "sh", "-c", PROBE],
                                     "securityContext": {"privileged": True},
                                     "terminationMessagePolicy": "FallbackToLogsOnError"}]}}


async def probe(session: KubeSession, node: str, gpus: int, source: str, timeout: float) -> NodeResult:
    pod = probe_pod(node)
    name = pod["metadata"]["name"]
    path = api_path("v1", "pods", namespace=NAMESPACE, name=name)
    await session.create(api_path("v1", "pods", namespace=NAMESPACE), pod)
    try:
        deadline = time.monotonic() + timeout
        while True:
            current = await session.get(path) or {}
            phase = (current.get("status") or {}).get("phase")
            if phase in ("Succeeded", "Failed"):
                break
            if time.monotonic() > deadline:
                return NodeResult(node, gpus, source, "UNKNOWN", reason=f"probe not finished after {timeout:.0f}s")
            await asyncio.sleep(1.0)
        text = await session.text(path + "/log")
        return verdict(node, gpus, source, parse_probe(text))
    except KubeApiError as exc:
        return NodeResult(node, gpus, source, "UNKNOWN", reason=exc.message)
    finally:
        try:
            await session.delete(path)
        except KubeApiError:
            pass


async def validate_nodes(session: KubeSession, selector: str | None, timeout: float) -> list[NodeResult]:
    nodes = await session.list_items(api_path("v1", "nodes"), label_selector=selector or None)
    dra = dra_gpus(await resource_slices(session))
    results: list[NodeResult] = []
    jobs = []
    for node in sorted(nodes, key=lambda n: n["metadata"]["name"]):
        source, count = gpu_source(node)
        name = node["metadata"]["name"]
        if not count and dra.get(name):
            source, count = "dra", dra[name]
        if count:
            jobs.append(probe(session, name, count, source, timeout))
        elif looks_like_gpu(node):
            results.append(NodeResult(name, 0, "none", "UNHEALTHY", reason="exposes no schedulable GPUs"))
    results += await asyncio.gather(*jobs)
    return sorted(results, key=lambda r: r.node)


def table(results: list[NodeResult]) -> str:
    from tau_core.output import render_table

    rows = [(r.node, r.gpus, r.source, r.nvlink, r.ib, r.ecc, r.driver,
             r.status + (f" ({r.reason})" if r.reason else "")) for r in results]
    healthy = sum(r.status in ("HEALTHY", "DEGRADED") for r in results)
    head = ["NODE", "GPUS", "SOURCE", "NVLINK", "IB", "ECC", "DRIVER", "STATUS"]
    return render_table(rows, head) + f"\n{healthy}/{len(results)} nodes healthy"


def outcome(results: list[NodeResult], min_healthy: int) -> None:
    healthy = sum(r.status in ("HEALTHY", "DEGRADED") for r in results)
    if not results:
        if min_healthy > 0:
            raise TauError("no GPU nodes found", hint="check --gpu-class/--selector, or scale up the GPU pool")
        return
    if min_healthy > 0:
        if healthy < min_healthy:
            raise TauError(f"only {healthy} healthy nodes, need at least {min_healthy}")
        return
    if healthy < len(results):
        raise TauError(f"node validation failed: {healthy}/{len(results)} nodes healthy")
