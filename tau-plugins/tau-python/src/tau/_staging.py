"""Staging a handle for ``tau run``: the manifest, the module and the secret payload in one directory."""

from __future__ import annotations

import importlib.util
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tau._errors import TauSDKError

if TYPE_CHECKING:
    from tau._workflow import WorkloadHandle

USER_MODULE = "tau_user_module.py"
SECRET_PAYLOAD = "tau-job-secrets.json"


def load_function(path: Path, function: str) -> Callable[..., Any]:
    """Import ``path`` as a module and return ``function`` (the handle's function when it is a handle)."""
    if not path.is_file():
        raise FileNotFoundError(f"tau-py: module {str(path)!r} does not exist")
    spec = importlib.util.spec_from_file_location(f"tau_staged_{abs(hash(str(path)))}", path)
    if spec is None or spec.loader is None:
        raise TauSDKError(f"tau-py: cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    fn = getattr(module, function, None)
    if fn is None:
        raise TauSDKError(f"tau-py: {path} has no function {function!r}")
    inner = getattr(fn, "fn", None)
    return inner if callable(inner) else fn  # type: ignore[no-any-return]


def to_yaml(doc: dict[str, Any]) -> str:
    """Deterministic YAML (sorted keys, no line wrapping) of a plain JSON-able document."""
    import io

    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    yaml.default_flow_style = False
    yaml.width = 4096
    buf = io.StringIO()
    yaml.dump(json.loads(json.dumps(doc)), buf)
    return buf.getvalue()


def stage(handle: WorkloadHandle, directory: Path, *, upstream_checkpoint: str | None = None,
          overrides: dict[str, Any] | None = None, with_secrets: bool = True) -> Path:
    """Write ``<name>.yaml``, the module (``tau_user_module.py``), extra scripts and the 0600 secret payload."""
    directory.mkdir(parents=True, exist_ok=True)
    script: str | None = handle.script
    if script:
        src = Path(script)
        if src.is_absolute() and not src.exists():
            pass  # lives in the image
        else:
            src = src if src.is_absolute() else Path.cwd() / src
            if not src.is_file():
                raise FileNotFoundError(f"tau-py: entrypoint {handle.script!r} does not exist ({src})")
            (directory / USER_MODULE).write_bytes(src.read_bytes())
            script = USER_MODULE
    staged_scripts = []
    for spec in handle.extra_scripts:
        src_text, _, dest = spec.partition(":")
        src = Path(src_text) if Path(src_text).is_absolute() else Path.cwd() / src_text
        if not src.is_file():
            raise FileNotFoundError(f"tau-py: extra_scripts {src_text!r} does not exist ({src})")
        target = dest or src.name
        (directory / target).write_bytes(src.read_bytes())
        staged_scripts.append(target)
    doc = handle.manifest(script=script, generated=True, upstream_checkpoint=upstream_checkpoint,
                          overrides=overrides)
    if staged_scripts:
        doc.setdefault("workflow", {})["extra_scripts"] = staged_scripts
    secrets = handle.secret_values() if with_secrets else {}
    if secrets:
        payload = directory / SECRET_PAYLOAD
        fd = os.open(payload, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump({"name": handle.resource_name, "stringData": secrets}, fh, sort_keys=True)
        os.chmod(payload, 0o600)
        doc.setdefault("workflow", {})["secret_payload"] = SECRET_PAYLOAD
    path = directory / f"{handle.name}.yaml"
    path.write_text(to_yaml(doc), encoding="utf-8")
    return path
