"""A pod's container spec turned into what a local process needs: argv, environment, working directory.

Used by the process kubelet (:mod:`tau_testing.sim.kubelet_process`). Volumes become host directories
(``emptyDir`` and friends per pod, a ``persistentVolumeClaim`` per claim so data outlives the pod), and the
container's mount paths are rewritten to those directories wherever they appear as a path in the command,
the args, the env values and ``workingDir``. Env is what the pod renders (``value``, ``valueFrom`` a Secret,
ConfigMap or pod field, ``envFrom``) plus ``PATH`` from the host; nothing else of the host's environment.
"""

from __future__ import annotations

import base64
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tau_testing.sim.controllers import _util as u

_REF = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")


@dataclass
class HostContainer:
    """What runs one container on the host."""

    name: str
    argv: list[str]
    env: dict[str, str]
    cwd: Path
    memory_limit: int | None = None
    mounts: dict[str, Path] = field(default_factory=dict)


@dataclass
class VolumeRoots:
    """Where volumes live on the host: ``root/pods/<pod>/volumes/<name>`` and ``root/claims/<ns>/<claim>``,
    unless ``claims`` maps ``"<ns>/<claim>"`` (or ``"<claim>"``) to a directory of its own."""

    root: Path
    claims: Mapping[str, Path] = field(default_factory=dict)

    def pod_dir(self, pod: dict[str, Any]) -> Path:
        ns, name = u.key(pod)
        return self.root / "pods" / f"{ns}_{name}_{pod['metadata']['uid'][:8]}"

    def claim_dir(self, namespace: str, claim: str) -> Path:
        mapped = self.claims.get(f"{namespace}/{claim}") or self.claims.get(claim)
        return Path(mapped) if mapped is not None else self.root / "claims" / namespace / claim


def runnable(container: dict[str, Any]) -> bool:
    """A container can run as a process only when it names its command (the image's entrypoint is unknown)."""
    return bool(container.get("command"))


def volume_dirs(cluster: Any, pod: dict[str, Any], roots: VolumeRoots) -> dict[str, Path]:
    """Volume name -> host directory, created and filled (ConfigMap/Secret keys become files)."""
    ns, _ = u.key(pod)
    base = roots.pod_dir(pod) / "volumes"
    out: dict[str, Path] = {}
    for vol in (pod.get("spec") or {}).get("volumes") or []:
        name = vol["name"]
        if "persistentVolumeClaim" in vol:
            path = roots.claim_dir(ns, vol["persistentVolumeClaim"].get("claimName", name))
        else:
            path = base / name
        path.mkdir(parents=True, exist_ok=True)
        for key_name, data in _volume_files(cluster, ns, vol).items():
            target = path / key_name
            if target.resolve().parent == path.resolve() and not target.exists():
                target.write_bytes(data)
        out[name] = path
    return out


def _volume_files(cluster: Any, ns: str, vol: dict[str, Any]) -> dict[str, bytes]:
    if "configMap" in vol:
        obj = u.get(cluster, "v1", "ConfigMap", ns, vol["configMap"].get("name", "")) or {}
        return {k: str(v).encode() for k, v in (obj.get("data") or {}).items()}
    if "secret" in vol:
        obj = u.get(cluster, "v1", "Secret", ns, vol["secret"].get("secretName", "")) or {}
        return {k: base64.b64decode(v) for k, v in (obj.get("data") or {}).items()}
    return {}


def host_container(cluster: Any, pod: dict[str, Any], container: dict[str, Any], volumes: dict[str, Path],
                   pod_dir: Path) -> HostContainer:
    """argv, env and cwd of ``container`` with its mount paths mapped onto ``volumes``."""
    mounts: dict[str, Path] = {}
    for mount in container.get("volumeMounts") or []:
        source = volumes.get(mount.get("name", ""))
        if source is None:
            continue
        host = source / mount["subPath"] if mount.get("subPath") else source
        host.mkdir(parents=True, exist_ok=True)
        mounts[str(mount["mountPath"]).rstrip("/") or "/"] = host
    mapper = PathMapper(mounts)
    env = {k: mapper.rewrite(v) for k, v in container_env(cluster, pod, container).items()}
    home = pod_dir / "home"
    home.mkdir(parents=True, exist_ok=True)
    base = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home),
            "HOSTNAME": str((pod.get("spec") or {}).get("hostname") or pod["metadata"]["name"])}
    env = {**base, **env}
    argv = [mapper.rewrite(expand(str(a), env)) for a in (container.get("command") or [])
            + (container.get("args") or [])]
    working = container.get("workingDir")
    cwd = Path(mapper.rewrite(str(working))) if working else home
    if not cwd.is_absolute() or not cwd.is_dir():
        cwd = home
    limit = ((container.get("resources") or {}).get("limits") or {}).get("memory")
    memory = int(u.parse_quantity(limit)) if limit else None
    return HostContainer(container["name"], argv, env, cwd, memory, mounts)


class PathMapper:
    """Rewrites container mount paths (``/data``, ``/data/x``) to host directories in one pass."""

    def __init__(self, mounts: Mapping[str, Path]) -> None:
        self.mounts = {k: str(v) for k, v in mounts.items() if k != "/"}
        order = sorted(self.mounts, key=len, reverse=True)
        alternatives = "|".join(re.escape(m) for m in order)
        self._pattern = re.compile(rf"(?<![\w.\-])({alternatives})(?=/|$|[^\w.\-])") if order else None

    def rewrite(self, text: str) -> str:
        if self._pattern is None:
            return text
        return self._pattern.sub(lambda m: self.mounts[m.group(1)], text)


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command and args (``$$`` escapes; unknown names stay as written)."""
    def one(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env[name] if name in env else match.group(0)

    return _REF.sub(one, text)


def container_env(cluster: Any, pod: dict[str, Any], container: dict[str, Any]) -> dict[str, str]:
    """The env a container sees, in the order Kubernetes builds it (``envFrom`` first, then ``env``)."""
    ns, _ = u.key(pod)
    env: dict[str, str] = {}
    for source in container.get("envFrom") or []:
        prefix = source.get("prefix", "")
        for key_name, value in _from_source(cluster, ns, source).items():
            env[prefix + key_name] = value
    for item in container.get("env") or []:
        if "value" in item:
            env[item["name"]] = expand(str(item["value"]), env)
        elif "valueFrom" in item:
            resolved = _value_from(cluster, pod, item["valueFrom"])
            if resolved is not None:
                env[item["name"]] = resolved
        else:
            env[item["name"]] = ""
    return env


def _from_source(cluster: Any, ns: str, source: dict[str, Any]) -> dict[str, str]:
    if "configMapRef" in source:
        obj = u.get(cluster, "v1", "ConfigMap", ns, source["configMapRef"].get("name", "")) or {}
        return {k: str(v) for k, v in (obj.get("data") or {}).items()}
    if "secretRef" in source:
        obj = u.get(cluster, "v1", "Secret", ns, source["secretRef"].get("name", "")) or {}
        return {k: base64.b64decode(v).decode(errors="replace") for k, v in (obj.get("data") or {}).items()}
    return {}


def _value_from(cluster: Any, pod: dict[str, Any], ref: dict[str, Any]) -> str | None:
    ns, _ = u.key(pod)
    if "secretKeyRef" in ref:
        sel = ref["secretKeyRef"]
        data = (u.get(cluster, "v1", "Secret", ns, sel.get("name", "")) or {}).get("data") or {}
        raw = data.get(sel.get("key", ""))
        return None if raw is None else base64.b64decode(raw).decode(errors="replace")
    if "configMapKeyRef" in ref:
        sel = ref["configMapKeyRef"]
        data = (u.get(cluster, "v1", "ConfigMap", ns, sel.get("name", "")) or {}).get("data") or {}
        value = data.get(sel.get("key", ""))
        return None if value is None else str(value)
    if "fieldRef" in ref:
        return _field(pod, str(ref["fieldRef"].get("fieldPath", "")))
    return None


def _field(pod: dict[str, Any], path: str) -> str | None:
    meta, spec, status = pod.get("metadata") or {}, pod.get("spec") or {}, pod.get("status") or {}
    simple = {"metadata.name": meta.get("name"), "metadata.namespace": meta.get("namespace"),
              "metadata.uid": meta.get("uid"), "spec.nodeName": spec.get("nodeName"),
              "spec.serviceAccountName": spec.get("serviceAccountName"), "status.hostIP": status.get("hostIP"),
              "status.podIP": status.get("podIP")}
    if path in simple:
        value = simple[path]
        return None if value is None else str(value)
    match = re.fullmatch(r"metadata\.(labels|annotations)\['([^']+)'\]", path)
    if match:
        value = (meta.get(match.group(1)) or {}).get(match.group(2))
        return None if value is None else str(value)
    return None
