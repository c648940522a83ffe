"""The Markdown field reference (``tau run explain-config``), generated from the field catalog."""

from __future__ import annotations

from tau_core.config.catalog import FIELDS, Field

_GROUP_TITLES = {
    "": "Identity",
    "run": "run: job source staging and Ray project shipping",
    "workflow": "workflow: delegation to a managed workflow manifest",
    "runtime": "runtime: image, environment and security",
    "compute": "compute: workers, GPUs, CPU and memory",
    "policy": "policy: operator and accounting overrides",
    "storage": "storage: data, output, checkpoint and mounts",
    "profiler": "profiler: bounded profiling",
    "metrics": "metrics: metric history and offload",
    "experiment": "experiment: experiment identity",
    "execution": "execution: launcher and topology",
    "resilience": "resilience: automatic retry",
}


def _values(f: Field) -> str:
    parts: list[str] = []
    if f.values:
        parts.append(" | ".join(f"`{v}`" for v in f.values))
    if f.item_values:
        parts.append("items: " + " | ".join(f"`{v}`" for v in f.item_values))
    if f.deprecated_values:
        parts.append("deprecated: " + ", ".join(f"`{k}` → `{v}`" for k, v in sorted(f.deprecated_values.items())))
    if f.minimum is not None or f.maximum is not None:
        lo = "" if f.minimum is None else str(f.minimum)
        hi = "" if f.maximum is None else str(f.maximum)
        parts.append(f"range {lo}..{hi}")
    if f.pattern:
        parts.append(f"pattern `{f.pattern}`")
    if f.default is not None:
        parts.append(f"default `{_show(f.default)}`")
    if f.default_note:
        parts.append(f"default: {f.default_note}")
    if f.alias_of:
        parts.append(f"alias of `{f.alias_of}`")
    if f.case_insensitive:
        parts.append("case-insensitive")
    return "; ".join(parts) or "—"


def _show(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(str(v) for v in value) + "]"
    return str(value)


def _type(f: Field) -> str:
    return {"string_list": "list of strings", "string_map": "map of strings", "scalar_map": "map of scalars",
            "map": "map", "object_list": "list of objects", "string_or_integer": "string or integer"}.get(
        f.type, f.type)


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def explain_markdown() -> str:
    """The complete field reference as Markdown."""
    lines = [
        "# Tau direct run config: field reference",
        "",
        "Generated from the installed field catalog (the same catalog produces `tau run schema` and the "
        "validator). Engines: `job` = batch/v1 Job, `rayjob` = KubeRay RayJob.",
        "",
    ]
    groups: dict[str, list[Field]] = {}
    for f in FIELDS:
        group = f.path.split(".", 1)[0] if "." in f.path or f.type == "object" else ""
        groups.setdefault(group, []).append(f)
    for group, fields in groups.items():
        lines += [f"## {_GROUP_TITLES.get(group, group)}", "",
                  "| Field | Type | Status | Engines | Description | Values / defaults |",
                  "|---|---|---|---|---|---|"]
        for f in fields:
            lines.append(
                f"| `{f.path}` | {_type(f)} | {f.status} | {', '.join(f.engines)} | {_escape(f.description)} "
                f"| {_escape(_values(f))} |"
            )
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"
