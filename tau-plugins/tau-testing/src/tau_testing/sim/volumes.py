"""Host directories that stand in for PersistentVolumeClaims (the simulator binds no real volumes).

Two things read or write "the contents of a claim":

* the ``tau run get`` helper pods (labels ``app=tau-pvc-get|tau-pvc-list``): :func:`helper_output` computes
  what their shell script prints, against a host directory;
* with ``tau-sim serve --volumes-dir DIR``, the simulated container of a batch Job pod that mounts a claim at
  ``/data`` and has ``OUTPUT_DIR`` under ``/data`` writes ``report.json`` there, standing in for the training
  code (the simulator runs no code). Each claim ``NAMESPACE/CLAIM`` lives in ``DIR/NAMESPACE/CLAIM``.
"""

from __future__ import annotations

import base64
import json
import posixpath
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

HELPER_MOUNT = "/tau-pvc"  # where the `tau run get` helper pod mounts the claim (its /data lives below it)
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")


def _entry(path: Path, rel: str) -> str:
    return f"F {path.stat().st_size} {base64.b64encode(rel.encode()).decode()}"


def _host_path(volume: Path, container_path: str) -> Path | None:
    prefix = HELPER_MOUNT + "/data"
    if container_path != prefix and not container_path.startswith(prefix + "/"):
        return None
    rel = posixpath.normpath(container_path[len(prefix):].lstrip("/") or ".")
    if rel == ".." or rel.startswith("../"):
        return None
    return volume / rel


def helper_output(pod: dict[str, Any], volume: Path) -> list[str]:
    """What the ``tau run get`` helper pod prints when its claim's contents are ``volume``."""
    spec = pod.get("spec") or {}
    main = (spec.get("containers") or [{}])[0]
    env = {e.get("name"): e.get("value") for e in main.get("env") or []}
    mode = env.get("TAU_GET_MODE")
    root = _host_path(volume, str(env.get("TAU_GET_ROOT", "")))
    target = _host_path(volume, str(env.get("TAU_GET_TARGET", "")))
    if root is None or target is None:
        return ["TAU_PVC_GET_NOT_FOUND"]
    if target.is_symlink():
        return ["TAU_PVC_GET_REFUSED symlink"]
    if not target.exists():
        return ["TAU_PVC_GET_NOT_FOUND"]
    real_root, real = root.resolve(), target.resolve()
    if real != real_root and real_root not in real.parents:
        return ["TAU_PVC_GET_REFUSED outside"]
    if mode == "file":
        if not target.is_file():
            return ["TAU_PVC_GET_NOT_FOUND"]
        data = base64.b64encode(target.read_bytes()).decode()
        chunks = [data[i:i + 76] for i in range(0, len(data), 76)] or [""]
        return ["TAU_PVC_GET_BEGIN", *chunks, "TAU_PVC_GET_END"]
    lines = [_entry(path, str(path.relative_to(target))) for path in sorted(target.rglob("*"))
             if path.is_file() and not path.is_symlink()]
    lines.append(f"TAU_PVC_LIST_COMPLETE:{pod['metadata']['name']}")
    return lines


def _data_claim(pod: dict[str, Any], container: dict[str, Any]) -> str | None:
    """The claim ``container`` mounts at /data, if any."""
    volumes = {v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
               for v in (pod.get("spec") or {}).get("volumes") or []}
    for mount in container.get("volumeMounts") or []:
        if mount.get("mountPath") == "/data" and volumes.get(mount.get("name")):
            return str(volumes[mount.get("name")])
    return None


class HostVolumes:
    """Claims backed by ``root/NAMESPACE/CLAIM`` on this machine."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def claim_dir(self, namespace: str, claim: str) -> Path | None:
        if not (_NAME.match(namespace) and _NAME.match(claim)) or ".." in namespace + claim:
            return None
        return self.root / namespace / claim

    def helper_output(self, pod: dict[str, Any], container: str) -> list[str]:
        claims = [(v.get("persistentVolumeClaim") or {}).get("claimName")
                  for v in (pod.get("spec") or {}).get("volumes") or []]
        volume = self.claim_dir(str(pod["metadata"].get("namespace", "")), str(claims[0] if claims else ""))
        return helper_output(pod, volume) if volume is not None else ["TAU_PVC_GET_NOT_FOUND"]

    def job_container(self, lines: list[str]) -> Callable[[dict[str, Any], str], list[str]]:
        """A log source for batch Job pods that also writes ``report.json`` into ``$OUTPUT_DIR`` on the claim."""

        def run(pod: dict[str, Any], container: str) -> list[str]:
            spec = pod.get("spec") or {}
            [main] = [c for c in spec.get("containers") or [] if c.get("name") == container] or [{}]
            env = {e.get("name"): e.get("value") for e in main.get("env") or []}
            output, claim = str(env.get("OUTPUT_DIR") or ""), _data_claim(pod, main)
            volume = self.claim_dir(str(pod["metadata"].get("namespace", "")), claim) if claim else None
            target = _host_path(volume, HELPER_MOUNT + output) if volume is not None and output else None
            if target is None or not output.startswith("/data/"):
                return list(lines)
            target.mkdir(parents=True, exist_ok=True)
            report = {"simulated": True, "pod": pod["metadata"]["name"], "output": output}
            (target / "report.json").write_text(json.dumps(report, indent=2) + "\n")
            return [*lines, f"wrote {output}/report.json (simulated container)"]

        return run

    def install(self, cluster: Any, job_lines: list[str], job_seconds: float) -> None:
        """Script the helper pods and the batch Job pods of ``cluster`` against these directories."""
        from tau_testing.sim.scripts import PodScript, scripts_of

        self.root.mkdir(parents=True, exist_ok=True)
        book = scripts_of(cluster)
        for app in ("tau-pvc-get", "tau-pvc-list"):
            book.add({"app": app}, PodScript(run_seconds=0, logs=self.helper_output))
        book.add(lambda pod: "job-name" in ((pod.get("metadata") or {}).get("labels") or {}),
                 PodScript(run_seconds=job_seconds, logs=self.job_container(job_lines)))
