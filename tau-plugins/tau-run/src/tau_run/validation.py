"""``tau run validate``: find the file, validate it, and describe the outcome."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tau_core.config import ConfigValidationError, ManagedManifestError
from tau_core.config.loader import display_path, load_yaml_file
from tau_core.config.targets import Target, resolve_target
from tau_core.config.validate import is_managed_manifest, validate_document
from tau_core.errors import NotFoundError, UsageError
from tau_run.reporting import fail_with_issues, print_warnings


def find_config(name: str | None, config: Path | None, project: str | None) -> tuple[Target, str | None]:
    """The file to validate and the name override."""
    if config is not None:
        target = resolve_target(name, config=config, project=project)
        return target, name
    if name is not None:
        try:
            return resolve_target(name, project=project), None
        except (NotFoundError, UsageError):
            pass  # not a target: NAME overrides the name of the default config
    return resolve_target(None, project=project), name


def run_validate(*, name: str | None, config: Path | None, project: str | None, as_json: bool) -> dict[str, Any]:
    target, override = find_config(name, config, project)
    shown = display_path(target.config_path)
    doc_out: dict[str, Any] = {"file": shown, "valid": False, "errors": [], "warnings": []}
    try:
        doc = load_yaml_file(target.config_path, display=shown)
        managed = is_managed_manifest(doc.data)
        if managed:  # a schema_version: 1 manifest: its own schema, then the RayJob it renders as
            from tau_core.config.managed import validate_managed

            validated = validate_managed(doc, name_override=override, base_dir=target.config_path.resolve().parent)
        else:
            validated = validate_document(doc, name_override=override,
                                          base_dir=target.config_path.resolve().parent)
        profile = None
        if not managed and validated.normalized["policy"]["workload_profile_snapshot"]:
            profile = _check_snapshot(target, override, project)
    except ConfigValidationError as exc:
        if not as_json:
            fail_with_issues(exc)
        doc_out["errors"] = [_issue(i) for i in exc.issues]
        doc_out["warnings"] = [_issue(i) for i in exc.warnings]
        return doc_out
    except ManagedManifestError as exc:
        if not as_json:
            raise
        doc_out["errors"] = [{"file": shown, "line": 0, "column": 0, "path": "schema_version",
                              "message": exc.message, "hint": exc.hint}]
        doc_out["managed_workflow"] = True
        return doc_out
    if not as_json:
        print_warnings(validated.warnings)
    doc_out.update({
        "valid": True,
        "managed_workflow": managed,
        "name": validated.name,
        "engine": validated.engine,
        "engine_inferred": validated.engine_inferred,
        # only machine output carries the hash: hashing (and importing hashlib) is skipped for the text line
        "config_hash": validated.config_hash if as_json else None,
        "workload_profile": profile,
        "warnings": [_issue(i) for i in validated.warnings],
    })
    return doc_out


def _check_snapshot(target: Target, override: str | None, project: str | None) -> str | None:
    """Offline profile selection from the configured snapshot (fail-closed rules, conflicts with the config)."""
    from tau_core.config.resolve import RunOptions, resolve_offline

    resolution = resolve_offline(RunOptions(target=override, config=target.config_path, project=project))
    profile = resolution.request.context.workload_profile
    return str(profile["name"]) if profile else None


def _issue(issue: Any) -> dict[str, Any]:
    return {"file": issue.file, "line": issue.line, "column": issue.column, "path": issue.path,
            "message": issue.message, "hint": issue.hint}
