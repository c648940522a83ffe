"""``tau cluster profiles export``: a deterministic TauWorkloadProfileSnapshot of the ready profile set.

The TauCluster singleton is accepted only when its profile status is current, ready and self-consistent
(fail closed). The snapshot holds the fields ``tau_core.config.profiles.load_snapshot`` reads, and its
``profileSetHash`` is recomputed with the same ``profile_set_hash`` the reader checks.
"""

from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from tau_core.config.profiles import PROFILE_KEYS, SNAPSHOT_API_VERSION, SNAPSHOT_KIND, profile_set_hash
from tau_core.errors import ConfigError, NotFoundError, TauError
from tau_core.kube import KubeApiError, KubeSession, api_path, condition, run

SINGLETON = "cluster"


def _ready_at(obj: dict[str, Any], ctype: str, generation: int) -> bool:
    for cond in obj.get("conditions") or []:
        if cond.get("type") == ctype:
            return cond.get("status") == "True" and int(cond.get("observedGeneration", generation)) == generation
    return False


def ready_profiles(tc: dict[str, Any]) -> tuple[int, str, list[dict[str, Any]]]:
    """(generation, profileSetHash, resolved status profiles) of a current, ready, self-consistent TauCluster.

    Fail closed: a :class:`TauError` says why the status cannot be trusted.
    """
    name = tc["metadata"]["name"]
    generation = int(tc["metadata"].get("generation") or 0)
    wp = (tc.get("status") or {}).get("workloadProfiles") or {}
    observed = int(wp.get("observedGeneration") or 0)
    if observed != generation:
        raise TauError(f"TauCluster {name!r} workload profiles are stale: observed at generation {observed}, "
                       f"the object is at generation {generation}", hint="wait for the controller, then retry")
    ready = condition(tc, "WorkloadProfilesReady")
    if not ready or int(ready.get("observedGeneration", generation)) != generation:
        raise TauError(f"TauCluster {name!r} reports no WorkloadProfilesReady condition for generation {generation}")
    status_hash = str(wp.get("profileSetHash") or "")
    if not status_hash:
        raise TauError(f"TauCluster {name!r} has an empty profileSetHash")
    resolved = sorted((dict(p) for p in wp.get("profiles") or []), key=lambda p: str(p.get("name")))
    profiles = [{k: p[k] for k in PROFILE_KEYS if k in p} for p in resolved]
    unready = [p.get("name") for p in profiles if not _ready_at(p, "Ready", generation)]
    if unready:
        raise TauError(f"TauCluster {name!r} has profiles that are not Ready at generation {generation}: "
                       f"{', '.join(map(str, unready))}")
    calculated = profile_set_hash(list[Mapping[str, Any]](profiles))
    if calculated != status_hash:
        raise TauError(f"TauCluster {name!r} profileSetHash mismatch: status has {status_hash}, the profiles hash "
                       f"to {calculated}; refusing to use them", hint="wait for the controller to republish it")
    return generation, status_hash, resolved


def build_snapshot(tc: dict[str, Any]) -> dict[str, Any]:
    """The snapshot document of a TauCluster (only the fields the snapshot reader accepts)."""
    generation, status_hash, resolved = ready_profiles(tc)
    profiles = [{k: p[k] for k in PROFILE_KEYS if k in p} for p in resolved]
    return {"apiVersion": SNAPSHOT_API_VERSION, "kind": SNAPSHOT_KIND, "tauClusterGeneration": generation,
            "profileSetHash": status_hash, "profiles": profiles}


def dump(snapshot: dict[str, Any]) -> str:
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    out = io.StringIO()
    yaml.dump(snapshot, out)
    return out.getvalue()


def write_atomic(path: Path, text: str) -> None:
    """Temp file next to ``path`` (``.<name>.snapshot-*``), mode 0644, then rename over it."""
    path = path.expanduser()
    if not path.parent.is_dir():
        raise ConfigError(f"--output {path}: directory {path.parent} does not exist")
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.snapshot-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


async def read_singleton(context: str | None) -> dict[str, Any]:
    async with await KubeSession.connect(context=context) as session:
        try:
            tc = await session.get(api_path("tau.azure.com/v1alpha1", "clusters", name=SINGLETON), missing_ok=True)
        except KubeApiError as exc:
            if exc.status == 403:
                raise TauError(f"access to TauCluster {SINGLETON!r} is forbidden: {exc.message}") from exc
            raise
    if tc is None:
        raise NotFoundError(f"TauCluster singleton {SINGLETON!r} was not found",
                            hint="install TauGrid with tau cluster install")
    return tc


def export(context: str | None, path: str | None) -> None:
    text = dump(build_snapshot(run(read_singleton, context)))
    if path:
        write_atomic(Path(path), text)
        print(f"Wrote the workload profile snapshot to {path}.", file=sys.stderr)
    else:
        sys.stdout.write(text)
