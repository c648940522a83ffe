"""The direct run config (``tau.yaml``): one field catalog, its schema, docs and validator,
target discovery, resolution with visible sources, and offline workload-profile snapshots.

Typical use::

    from tau_core.config import load_config
    validated = load_config(Path("tau/train.yaml"))
    validated.normalized      # every field present, defaults applied, aliases resolved
    validated.config_hash     # sha256 of the canonical JSON of the normalized config

The normalized config is a nested dict with the catalog's canonical paths (aliases such as
``script``, ``image``, ``run.name`` and ``policy.priority`` are folded into ``entrypoint``,
``runtime.image``, ``name`` and ``policy.priority_tier``).  Fields that do not apply to the
engine are ``None``; ``engine`` is always ``job`` or ``rayjob``.
"""

from __future__ import annotations

from pathlib import Path

from tau_core.config.issues import ConfigIssue, ConfigValidationError, dotted
from tau_core.config.loader import Document, display_path, load_yaml_file
from tau_core.config.validate import (
    ManagedManifestError,
    ValidatedConfig,
    config_hash,
    get_path,
    is_managed_manifest,
    validate_document,
)

__all__ = [
    "ConfigIssue",
    "ConfigValidationError",
    "Document",
    "ManagedManifestError",
    "ValidatedConfig",
    "config_hash",
    "display_path",
    "dotted",
    "get_path",
    "is_managed_manifest",
    "load_config",
    "validate_document",
]


def load_config(path: Path, *, name_override: str | None = None, display: str | None = None,
                check_files: bool = True) -> ValidatedConfig:
    """Load and validate a direct run config file; config-relative paths resolve against its directory."""
    doc = load_yaml_file(path, display=display)
    return validate_document(doc, name_override=name_override, base_dir=path.resolve().parent,
                             check_files=check_files)
