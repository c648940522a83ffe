"""The installation plan block and the offline render summary of ``tau cluster install``."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from tau_cluster.options import InstallOptions, is_local_chart

DEFAULTS = ("Kueue", "KubeRay", "tau-core-controller", "TauCluster", "baseline queue", "quota admission guard",
            "GPU monitoring", "Portal")
OPT_IN = ("Stellar", "lifecycle recorder", "image prewarm")
VALIDATION = "Kubernetes >=1.30 and the required control-plane and Portal resources ready"


def plan_document(options: InstallOptions) -> dict[str, Any]:
    """The plan as data (``-o json``); :func:`plan_text` prints the same facts."""
    wait = ("Helm waits on both passes" if options.wait or options.atomic else
            "bootstrap pass only (Tau readiness validation still runs after the queue policy)")
    return {
        "release": options.release,
        "namespace": options.namespace,
        "chart": options.chart,
        "version": "local chart directory" if is_local_chart(options.chart) else options.version,
        "helmWait": wait,
        "rollback": "enabled (implies Helm's wait)" if options.atomic else "disabled",
        "defaults": list(DEFAULTS),
        "optIn": list(OPT_IN),
        "validation": VALIDATION,
        "dryRun": options.dry_run,
    }


def plan_text(plan: dict[str, Any]) -> str:
    rows = [("Release", plan["release"]), ("Namespace", plan["namespace"]), ("Chart", plan["chart"]),
            ("Version", plan["version"]), ("Helm wait", plan["helmWait"]), ("Rollback", plan["rollback"]),
            ("Defaults", ", ".join(plan["defaults"])), ("Opt-in", ", ".join(plan["optIn"])),
            ("Validation", plan["validation"])]
    return "TauGrid installation plan\n" + "\n".join(f"  {k + ':':<12}{v}" for k, v in rows)


_DOC_SPLIT = re.compile(r"^---[ \t]*$", re.MULTILINE)
_TOP_KIND = re.compile(r"^kind:[ \t]*['\"]?([A-Za-z0-9]+)", re.MULTILINE)


def split_documents(text: str) -> list[tuple[str, str]]:
    """(kind, document text) of every non-empty document of a rendered manifest stream.

    Helm writes each object with its top-level keys at column 0, so the first ``kind:`` at the start of a
    line is the object's kind; nested ``kind:`` keys are always indented. Parsing every CRD in full just
    to count it costs most of a dry run's time, so only the documents a caller needs are parsed.
    """
    found = []
    for doc in _DOC_SPLIT.split(text):
        match = _TOP_KIND.search(doc)
        if match:
            found.append((match.group(1), doc))
    return found


def count_kinds(kinds: Iterable[str]) -> list[tuple[str, int]]:
    """Objects per kind, most numerous first, then by name."""
    counts = Counter(kinds)
    return sorted(counts.items(), key=lambda item: (-item[1], item[0]))


def summary_text(counts: list[tuple[str, int]]) -> str:
    width = max([len(k) for k, _ in counts] + [5])
    lines = ["TauGrid render summary (nothing was applied)"]
    lines += [f"  {kind:<{width}}  {n:>4}" for kind, n in counts]
    lines.append(f"  {'Total':<{width}}  {sum(n for _, n in counts):>4} objects")
    lines.append("Rendered the TauGrid manifests offline. The cluster was not read or changed.")
    return "\n".join(lines)


def parse_manifests(text: str) -> list[dict[str, Any]]:
    from ruamel.yaml import YAML

    yaml = YAML(typ="safe", pure=True)
    return [d for d in yaml.load_all(text) if isinstance(d, dict)]
