"""``tau python build``: a deterministic ``tau.python.build`` artifact with a build index.

Layout: ``<out>/tau-build.json`` and, per workload, ``<out>/<name>/<name>.yaml`` plus the staged
module.  Nothing depends on time, the machine or the temp directory: two builds of the same
sources are byte-identical.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tau_core.errors import ConfigError, UsageError

INDEX = "tau-build.json"
SCHEMA = "tau.python.build"


def build(wf: Any, out: Path, *, force: bool, upstream_checkpoint: str | None) -> dict[str, Any]:
    from tau._secrets import SecretSource
    from tau._staging import stage
    from tau_python.discovery import upstream_for

    if out.exists() and any(out.iterdir()):
        if not force:
            raise UsageError(f"{out} is not empty", hint="pass --force to replace it")
        if not (out / INDEX).is_file():
            raise UsageError(f"{out} is not empty and holds no {INDEX}; refusing to delete it",
                             hint="choose an empty or new directory")
        shutil.rmtree(out)
    out.mkdir(parents=True, exist_ok=True)
    workloads = []
    for handle in wf.handles:
        secrets = [k for k, v in handle.env.items() if isinstance(v, SecretSource)]
        if secrets:
            raise ConfigError(f"{handle.name}: secret values ({', '.join(sorted(secrets))}) cannot be built into "
                              "an artifact", hint="use tau.secret_ref(name, key) for built workflows, or submit "
                                                  "with tau python submit")
        upstream = upstream_for(wf, upstream_checkpoint) if handle.kind == "rayjob-eval" else None
        manifest = stage(handle, out / handle.name, upstream_checkpoint=upstream, with_secrets=False)
        workloads.append({"kind": handle.kind, "name": handle.name,
                          "namespace": handle.placement.namespace or "ray",
                          "resource_name": handle.resource_name,
                          "config": manifest.relative_to(out).as_posix()})
    index = {"schema": SCHEMA, "schema_version": 1, "source": wf.module.name, "workloads": workloads}
    (out / INDEX).write_text(json.dumps(index, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return index


def read_index(build_dir: Path) -> dict[str, Any]:
    path = build_dir / INDEX
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a tau python build ({exc})", hint="create one with tau python build") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA or not isinstance(doc.get("workloads"), list):
        raise ConfigError(f"{path}: schema must be {SCHEMA!r} with a workloads list")
    for item in doc["workloads"]:
        config = (build_dir / str(item.get("config", ""))).resolve()
        if build_dir.resolve() not in config.parents:
            raise ConfigError(f"{path}: workload config {item.get('config')!r} escapes the build directory")
    return doc
