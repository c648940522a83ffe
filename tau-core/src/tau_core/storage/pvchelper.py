"""The helper pod behind the ``pvc`` storage backend: one short-lived pod per operation.

It extends the ``tau run get`` helper (same pinned busybox image, same mount point, same
hardening) with writes: ``create`` hard-links a fully written hidden temporary file into place
(``ln`` fails if the name exists, so a record appears whole or not at all), ``swap``/``delete``
compare the current sha256 under ``flock`` and ``mv`` (rename) the new bytes over the old.
Every path is re-checked on the volume: symlinks are refused, and the nearest existing ancestor
of the target must resolve inside the registry root.
"""

from __future__ import annotations

import base64
import secrets
import time
from typing import Any

from tau_core import keys

MAX_PAYLOAD = 512 * 1024
APP = "tau-pvc-registry"
OK, EXISTS, CONFLICT, MISSING, REFUSED = ("TAU_PVC_OK", "TAU_PVC_EXISTS", "TAU_PVC_CONFLICT", "TAU_PVC_NOT_FOUND",
                                          "TAU_PVC_REFUSED")
COMPLETE = "TAU_PVC_COMPLETE"

SCRIPT = r"""
set -u
root="$TAU_PVC_ROOT"; key="$TAU_PVC_KEY"; op="$TAU_PVC_OP"; expect="${TAU_PVC_EXPECT:-}"
mkdir -p "$root" 2>/dev/null || true
real_root=$(readlink -f "$root") || { echo "TAU_PVC_REFUSED root"; exit 0; }
inside() { case "$1" in "$real_root"|"$real_root"/*) return 0;; *) return 1;; esac; }
etag() { sha256sum "$1" | cut -c1-32; }
target="$root/$key"
if [ "$op" = list ]; then
  dir="$root"; [ -n "$key" ] && dir="$target"
  if [ -L "$dir" ]; then echo "TAU_PVC_REFUSED symlink $key"; exit 0; fi
  if [ -d "$dir" ]; then
    if ! inside "$(readlink -f "$dir")"; then echo "TAU_PVC_REFUSED outside"; exit 0; fi
    cd "$root" || exit 1
    find "./${key:-.}" -name '.*' ! -name '.' -prune -o \( -type l -print \) | while IFS= read -r f; do
      printf 'L %s\n' "$(printf '%s' "${f#./}" | base64 | tr -d '\n')"; done
    find "./${key:-.}" -name '.*' ! -name '.' -prune -o \( -type f -print \) | while IFS= read -r f; do
      printf 'F %s %s\n' "$(wc -c < "$f")" "$(printf '%s' "${f#./}" | base64 | tr -d '\n')"; done
  fi
  echo "TAU_PVC_COMPLETE"; exit 0
fi
if [ -L "$target" ]; then echo "TAU_PVC_REFUSED symlink $key"; exit 0; fi
p=$(dirname "$target"); while [ ! -e "$p" ] && [ ! -L "$p" ]; do p=$(dirname "$p"); done
if [ -L "$p" ] || ! inside "$(readlink -f "$p")"; then echo "TAU_PVC_REFUSED outside"; exit 0; fi
case "$op" in
read)
  [ -f "$target" ] || { echo "TAU_PVC_NOT_FOUND"; exit 0; }
  tmp=$(mktemp) && cp "$target" "$tmp" || exit 1
  echo "TAU_PVC_OK $(etag "$tmp")"; echo "TAU_PVC_BEGIN"; base64 "$tmp"; echo "TAU_PVC_END"; rm -f "$tmp";;
hash)
  [ -f "$target" ] || { echo "TAU_PVC_NOT_FOUND"; exit 0; }
  echo "TAU_PVC_OK $(sha256sum "$target" | cut -d' ' -f1) $(wc -c < "$target")";;
create|swap|delete)
  dir=$(dirname "$target"); mkdir -p "$dir" || exit 1
  inside "$(readlink -f "$dir")" || { echo "TAU_PVC_REFUSED outside"; exit 0; }
  tmp="$dir/.$(basename "$target").$$.tmp"
  if [ "$op" != delete ]; then printf '%s' "$TAU_PVC_PAYLOAD" | base64 -d > "$tmp" && sync "$tmp" 2>/dev/null; fi
  mkdir -p "$root/.locks"; exec 9>"$root/.locks/$(printf '%s' "$key" | sha256sum | cut -c1-40)"
  flock -w 30 9 || { rm -f "$tmp"; echo "TAU_PVC_CONFLICT lock"; exit 0; }
  current=""; [ -f "$target" ] && current=$(etag "$target")
  if [ "$op" = create ]; then
    if ln "$tmp" "$target" 2>/dev/null; then echo "TAU_PVC_OK $(etag "$tmp")"; else echo "TAU_PVC_EXISTS"; fi
  elif [ "$op" = delete ]; then
    if [ -z "$current" ]; then echo "TAU_PVC_NOT_FOUND"
    elif [ -n "$expect" ] && [ "$current" != "$expect" ]; then echo "TAU_PVC_CONFLICT $current"
    else rm -f "$target" && echo "TAU_PVC_OK"; rmdir -p "$dir" 2>/dev/null || true; fi
  elif [ "$current" != "$expect" ]; then echo "TAU_PVC_CONFLICT $current"
  elif [ -z "$expect" ]; then
    if ln "$tmp" "$target" 2>/dev/null; then echo "TAU_PVC_OK $(etag "$tmp")"; else echo "TAU_PVC_CONFLICT exists"; fi
  else mv -f "$tmp" "$target" && echo "TAU_PVC_OK $(etag "$target")"; fi
  rm -f "$tmp";;
esac
""".strip()


def helper_pod(ns: str, pvc: str, mount: str, root: str, op: str, key: str, *, payload: bytes = b"",
               expect: str | None = None) -> dict[str, Any]:
    """The pod for one operation.  ``mount`` is where the volume is mounted, ``root`` the registry root inside it."""
    from tau_core.backends.kubernetes import HELPER_IMAGE

    name = f"tau-pvc-{op}-{int(time.time() * 1e3) % 10**9}-{secrets.token_hex(3)}"
    env = [{"name": "TAU_PVC_OP", "value": op}, {"name": "TAU_PVC_ROOT", "value": root},
           {"name": "TAU_PVC_KEY", "value": key}, {"name": "TAU_PVC_EXPECT", "value": expect or ""}]
    if op in ("create", "swap"):
        env.append({"name": "TAU_PVC_PAYLOAD", "value": base64.b64encode(payload).decode()})
    writes = op in ("create", "swap", "delete")
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": ns, "labels": {"app": APP, keys.MANAGED_BY: keys.MANAGED_BY_VALUE}},
        "spec": {
            "restartPolicy": "Never", "activeDeadlineSeconds": 60, "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "runAsUser": 65532, "fsGroup": 65532,
                                "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [{
                "name": "registry", "image": HELPER_IMAGE, "command": ["sh", "-c", SCRIPT], "env": env,
                "volumeMounts": [{"name": "data", "mountPath": mount, "readOnly": not writes},
                                 {"name": "tmp", "mountPath": "/tmp"}],
                "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}},
                "securityContext": {"allowPrivilegeEscalation": False, "readOnlyRootFilesystem": True,
                                    "capabilities": {"drop": ["ALL"]}},
            }],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": pvc, "readOnly": not writes}},
                        {"name": "tmp", "emptyDir": {"sizeLimit": "16Mi"}}],
        },
    }
