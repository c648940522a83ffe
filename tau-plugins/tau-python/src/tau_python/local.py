"""``tau python submit --local``: each handle runs as a local-backend run (``tau run --local --follow``).

The handle is staged under ``<tau data dir>/python/<name>/`` as the generated wrapper, the module and
its manifest (``tau_manifest.json``), plus a direct Job config pointing at the wrapper; the local
backend then supervises it like any local run (registry, logs, ``tau run status``), with the same
``/data`` layout a pod sees, mapped to this machine.  An eval reads the train's checkpoint through
``ctx.upstream_checkpoint`` (the in-pod path, mapped under the local data directory).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError
from tau_core.keys import STELLAR_HISTORY_GLOB

CONFIG = "tau-local.yaml"
#: The local backend runs on this machine's Python; the rendered Job still names an image.
LOCAL_IMAGE = "python:3.12-slim"


def stage_local(handle: Any, root: Path, *, upstream_checkpoint: str | None, project: str) -> Path:
    """Write the wrapper, module, manifest and a direct Job config for ``handle``; returns the config path."""
    from tau._secrets import SecretSource
    from tau._staging import USER_MODULE, stage, to_yaml
    from tau_core.config.managed import MANIFEST_FILE, WRAPPER, wrapper_source

    inline = sorted(k for k, v in handle.env.items() if isinstance(v, SecretSource) and v.kind != "env")
    if inline:
        raise ConfigError(f"{handle.name}: secret values ({', '.join(inline)}) cannot be passed to a local run",
                          hint="use tau.secret_from_env(...) and export the variable: local runs inherit your "
                               "environment")
    if root.exists():
        shutil.rmtree(root)
    stage(handle, root, upstream_checkpoint=upstream_checkpoint, with_secrets=False)
    manifest = handle.manifest(script=USER_MODULE, generated=True, upstream_checkpoint=upstream_checkpoint)
    (root / MANIFEST_FILE).write_text(json.dumps(manifest, sort_keys=True), encoding="utf-8")
    (root / WRAPPER).write_bytes(wrapper_source())
    plain = {k: v for k, v in sorted(handle.env.items()) if isinstance(v, str)}
    config: dict[str, Any] = {
        "name": handle.name, "engine": "job", "entrypoint": WRAPPER, "compute": {"gpus": 0},
        "storage": {"data_pvc": "local", "output": f"/data/checkpoints/finetunes/{handle.name}"},
        # tau.stellar writes closed chunks in a run; the local evidence bridge imports them into the store
        "metrics": {"history": [STELLAR_HISTORY_GLOB]},
        # one store project per module, one run group per workload (a group belongs to one project)
        "experiment": {"project": project, "group": handle.name},
    }
    image = (manifest.get("runtime") or {}).get("image") or LOCAL_IMAGE  # rendered, never pulled locally
    config["runtime"] = {"image": image, **({"env": plain} if plain else {})}
    path = root / CONFIG
    path.write_text(to_yaml(config), encoding="utf-8")
    return path


def run_with_local_backend(wf: Any) -> None:
    """Train, then eval with the train's checkpoint, each as a followed local-backend run."""
    from tau._submit import run_tau
    from tau_core.backends.local import paths
    from tau_core.output import info
    from tau_python.flow import CLIFailed

    upstream = None
    for handle in wf.handles:
        is_eval = handle.kind == "rayjob-eval"
        config = stage_local(handle, paths.tau_home() / "python" / handle.name,
                             upstream_checkpoint=upstream if is_eval else None, project=paths.slug(wf.module.stem))
        info(f"running {handle.name} with the local backend" + (f" (upstream checkpoint {upstream})"
                                                                 if is_eval else ""))
        code, _, _ = run_tau(["run", "--config", str(config), "--local", "--follow"], capture=False)
        if code != 0:
            raise CLIFailed(f"tau python submit: tau CLI failed (exit={code})", exit_code=code)
        if not is_eval:
            upstream = handle.upstream_path()
