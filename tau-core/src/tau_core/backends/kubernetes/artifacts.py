"""Results of a run, read from its result PVC through a short-lived, read-only helper pod (``tau run get``)."""

from __future__ import annotations

import base64
import posixpath
import re
import secrets
import time
from typing import Any

import anyio

from tau_core import keys
from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.kube import KubeSession, api_path
from tau_core.lifecycle.base import ArtifactListing, RunRef

from .objects import Obj, _ann, _meta
from .status import Status

HELPER_IMAGE = "busybox:1.36.1@sha256:f9a104fddb33220ec80fc45a4e606c74aadf1ef7a3832eb0b05be9e90cd61f5f"
HELPER_MOUNT = "/tau-pvc"
GET_NOT_FOUND = "TAU_PVC_GET_NOT_FOUND"
GET_REFUSED = "TAU_PVC_GET_REFUSED"
LIST_COMPLETE = "TAU_PVC_LIST_COMPLETE"
PUBLISH_DIR = keys.ARTIFACTS_DIR
PUBLISH_MARKER = keys.ARTIFACTS_COMPLETE_MARKER


def safe_relative(path: str) -> str:
    """Validate an artifact path: relative, inside the result directory, no tricks.  Returns it normalized."""
    from tau_core.pathsafe import check_lengths
    from tau_core.pathsafe import shown as _shown

    shown = _shown(path)
    if "\x00" in path or any(ord(c) < 32 for c in path):
        raise UsageError(f"--artifact \"{shown}\" contains control characters", hint="pass a plain relative file path")
    if not path.strip():
        raise UsageError("--artifact must not be empty", hint="pass a path relative to the run's result directory")
    check_lengths(path, what="--artifact")
    if path.startswith("/") or path.startswith("~") or re.match(r"^[A-Za-z]:", path) or "\\" in path:
        raise UsageError(f"--artifact \"{shown}\" must be a relative path inside the result directory",
                         hint="drop the leading / (paths are relative to the run's result directory)")
    parts = path.split("/")
    if any(p == ".." for p in parts):
        raise UsageError(f"--artifact \"{shown}\" escapes the result directory",
                         hint="artifact paths may not contain '..'")
    if "->" in path or any(p.endswith("@") for p in parts):
        raise UsageError(f"--artifact \"{shown}\" looks like a symbolic link, which run get never follows",
                         hint="name the file the link points to, relative to the result directory")
    normalized = posixpath.normpath(path)
    if normalized in (".", "") or normalized.startswith("../"):
        raise UsageError(f"--artifact \"{shown}\" does not name anything inside the result directory")
    return normalized


def _clean_abs(path: str, flag: str) -> str:
    if "\x00" in path or not path.startswith("/"):
        raise UsageError(f"{flag} \"{path}\" must be an absolute container path",
                         hint="for example /data/<run>/results")
    if any(p == ".." for p in path.split("/")):
        raise UsageError(f"{flag} \"{path}\" must not contain '..'")
    return posixpath.normpath(path)


class Artifacts(Status):
    def get(self, ref: RunRef, artifact: str | None = None, *, path: str | None = None,
            pvc: str | None = None) -> ArtifactListing | bytes:
        """Results of a run from its result PVC, read through a short-lived helper pod."""
        rel = safe_relative(artifact) if artifact is not None else None
        if (path is None) != (pvc is None):
            raise UsageError("pass both --path and --pvc (for deleted or external workloads), or neither")
        if path is not None:
            path = _clean_abs(path, "--path")
        self.last_get = {}
        result: ArtifactListing | bytes = self._run(self._get_async, ref, rel, path, pvc)
        return result

    async def _result_location(self, session: KubeSession, ns: str, name: str) -> tuple[str, str, str | None]:
        """``(root, pvc, publication)`` the run's workload declares (publication: a staged publication id)."""
        job, rayjob = await self._workload(session, ns, name)
        workload = job or rayjob
        if workload is None:
            raise NotFoundError(f"no Job or RayJob named \"{name}\" in namespace {ns}",
                                hint="for a deleted or external workload pass both --path and --pvc")
        ann = _ann(workload)
        root, pvc = ann.get(keys.RESULT_PATH), ann.get(keys.RESULT_PVC)
        self.last_get["checkpoint"] = ann.get(keys.CHECKPOINT_ARTIFACT)
        if not root or not pvc:
            raise NotFoundError(f"{name} declares no durable result location (storage.output on a PVC)",
                                hint="pass both --path and --pvc to read a known PVC path")
        publication = ann.get(keys.ARTIFACT_PUBLICATION_ID) if ann.get(keys.ARTIFACT_PUBLICATION) == "staged" else None
        return _clean_abs(root, keys.RESULT_PATH), pvc, publication

    async def _get_async(self, session: KubeSession, ref: RunRef, rel: str | None, path: str | None,
                         pvc: str | None) -> ArtifactListing | bytes:
        ns = (await self.resolve(session, ref)).namespace
        publication = None
        if path is None or pvc is None:
            path, pvc, publication = await self._result_location(session, ns, ref.name)
        base = path
        if publication:
            base = await self._published(session, ns, ref.name, pvc, path, publication)
        target_path = posixpath.join(base, rel) if rel else base
        is_file = rel is not None and posixpath.splitext(rel)[1] != ""
        self.last_get.update({"path": target_path, "pvc": pvc})
        return await self._helper(session, ns, ref.name, pvc, "file" if is_file else "list", target_path, base)

    async def _published(self, session: KubeSession, ns: str, name: str, pvc: str, root: str,
                         publication: str) -> str:
        """The directory of a staged publication, once its completion marker is there."""
        marker_dir = posixpath.join(root, PUBLISH_DIR, publication)
        try:
            marker: ArtifactListing | bytes | None = await self._helper(
                session, ns, name, pvc, "file", posixpath.join(marker_dir, PUBLISH_MARKER), root)
        except NotFoundError:
            marker = None
        if not isinstance(marker, bytes) or marker.decode("utf-8", "replace").strip() != f"complete {publication}":
            raise NotFoundError(
                f"the staged results of {name} are not published yet (publication {publication} has no "
                "completion marker)",
                hint=f"wait for the run to finish (`tau run status {name}`); a failed run publishes nothing")
        return marker_dir

    async def _helper(self, session: KubeSession, ns: str, run: str, pvc: str, mode: str, target: str,
                      root: str) -> ArtifactListing | bytes:
        """Run a one-shot helper pod that reads ``target`` (inside ``root``) from ``pvc``; always delete it."""
        pod_name = f"tau-get-{run[:30]}-{int(time.time() * 1e3) % 10**9}-{secrets.token_hex(3)}".lower()
        pod = _helper_pod(pod_name, ns, pvc, mode, target, root)
        path = api_path("v1", "pods", namespace=ns, name=pod_name)
        created = await session.create(api_path("v1", "pods", namespace=ns), pod)
        try:
            deadline = time.monotonic() + 90
            phase = ""
            while time.monotonic() < deadline:
                current = await session.get(path, missing_ok=True)
                phase = ((current or {}).get("status") or {}).get("phase", "")
                if phase in ("Succeeded", "Failed") or current is None:
                    break
                await anyio.sleep(0.2)
            if phase not in ("Succeeded", "Failed"):
                raise TauError(f"the helper pod {ns}/{pod_name} did not finish within 90s (phase {phase or '?'})",
                               hint=f"check that PVC {pvc} exists and can be mounted in namespace {ns}")
            text = await session.text(path + "/log", query={"container": "get"})
        finally:
            await session.delete(path, propagation="Background", uid=_meta(created).get("uid"))
        return _parse_helper(text, mode, target, root, pod_name)


_HELPER_SCRIPT = r"""
set -u
root="$TAU_GET_ROOT"; target="$TAU_GET_TARGET"
real_root=$(readlink -f "$root" 2>/dev/null || true)
if [ ! -e "$target" ]; then echo "TAU_PVC_GET_NOT_FOUND"; exit 0; fi
if [ -L "$target" ]; then echo "TAU_PVC_GET_REFUSED symlink"; exit 0; fi
real=$(readlink -f "$target")
case "$real" in "$real_root"|"$real_root"/*) ;; *) echo "TAU_PVC_GET_REFUSED outside"; exit 0;; esac
if [ "$TAU_GET_MODE" = file ]; then
  if [ ! -f "$target" ]; then echo "TAU_PVC_GET_NOT_FOUND"; exit 0; fi
  echo "TAU_PVC_GET_BEGIN"; base64 "$target"; echo "TAU_PVC_GET_END"; exit 0
fi
cd "$target" && find . -type f | while IFS= read -r f; do
  rel="${f#./}"; size=$(wc -c < "$f"); printf 'F %s %s\n' "$size" "$(printf '%s' "$rel" | base64 | tr -d '\n')"
done
echo "TAU_PVC_LIST_COMPLETE:$HOSTNAME"
""".strip()


def _helper_pod(name: str, ns: str, pvc: str, mode: str, target: str, root: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ns,
                     "labels": {"app": "tau-pvc-get" if mode == "file" else "tau-pvc-list",
                                keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
        "spec": {
            "restartPolicy": "Never",
            "activeDeadlineSeconds": 60,
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "get",
                "image": HELPER_IMAGE,
                "command": ["sh", "-c", _HELPER_SCRIPT],
                "env": [{"name": "TAU_GET_MODE", "value": mode},
                        {"name": "TAU_GET_ROOT", "value": HELPER_MOUNT + root},
                        {"name": "TAU_GET_TARGET", "value": HELPER_MOUNT + target}],
                "volumeMounts": [{"name": "data", "mountPath": HELPER_MOUNT + "/data", "readOnly": True}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc, "readOnly": True}}],
        },
    }


def _parse_helper(text: str, mode: str, target: str, root: str, pod: str) -> ArtifactListing | bytes:
    lines = text.splitlines()
    if any(line.startswith(GET_NOT_FOUND) for line in lines):
        raise NotFoundError(f"{target} does not exist on the result volume",
                            hint="list the result directory with `tau run get NAME` to see what exists")
    refused = [line for line in lines if line.startswith(GET_REFUSED)]
    if refused:
        raise UsageError(f"refusing to read {target}: it is a symbolic link or resolves outside the result directory")
    if mode == "file":
        try:
            begin, end = lines.index("TAU_PVC_GET_BEGIN"), lines.index("TAU_PVC_GET_END")
        except ValueError as exc:
            raise TauError(f"the helper pod {pod} returned an incomplete file (missing markers)",
                           hint="retry; if it persists, check the PVC with `kubectl get pvc`") from exc
        return base64.b64decode("".join(lines[begin + 1:end]))
    if not any(line.startswith(LIST_COMPLETE) for line in lines):
        raise TauError(f"the helper pod {pod} returned an incomplete listing", hint="retry the command")
    entries: list[dict[str, Any]] = []
    for line in lines:
        if line.startswith("F "):
            _, size, encoded = line.split(" ", 2)
            entries.append({"path": base64.b64decode(encoded).decode("utf-8", "replace"), "size": int(size),
                            "type": "file"})
    entries.sort(key=lambda e: str(e["path"]))
    return ArtifactListing(root=target, entries=entries)
