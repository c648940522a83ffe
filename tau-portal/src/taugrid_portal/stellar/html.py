"""Render a snapshot as one self-contained HTML page (no network needed to view it).

The page inlines uPlot (bundled at build time into ``vendor/``), our own script and styles, and
the snapshot JSON. Jinja2 autoescaping is on for every value taken from the store, the JSON is
escaped so that no string in it can close its ``<script>`` element, and a Content-Security-Policy
allows only the page's own inline scripts (by hash) — a run named ``<script>…`` is just text.
"""

from __future__ import annotations

import base64
import hashlib
import math
import os
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlsplit

from tau_core.errors import TauError

HERE = Path(__file__).resolve().parent
TEMPLATES = HERE / "templates"
VENDOR = HERE / "vendor"
VENDOR_FILES = ("uPlot.iife.min.js", "uPlot.min.css")
SAFE_SCHEMES = ("http", "https", "file")


class MissingAssetsError(TauError):
    """The build-time chart bundle is not installed."""


@lru_cache(maxsize=1)
def vendor_assets() -> dict[str, str]:
    """uPlot's JS/CSS and version, read once; a clear error when the bundle is missing."""
    missing = [name for name in VENDOR_FILES if not (VENDOR / name).is_file() or (VENDOR / name).stat().st_size == 0]
    if missing:
        raise MissingAssetsError(
            f"the Stellar chart library is missing from {VENDOR} ({', '.join(missing)}); "
            "it is bundled from npm when taugrid-portal is built",
            hint="reinstall taugrid-portal with Node.js/npm available, e.g. "
            "`pip install --force-reinstall --no-deps -e tau-portal` (or the wheel you installed)",
        )
    stamp = VENDOR / "VERSION"
    version = stamp.read_text(encoding="utf-8").split()[-1] if stamp.is_file() else "unknown"
    return {
        "js": (VENDOR / "uPlot.iife.min.js").read_text(encoding="utf-8"),
        "css": (VENDOR / "uPlot.min.css").read_text(encoding="utf-8"),
        "version": version,
    }


@lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=False,
        lstrip_blocks=False,
    )
    env.filters["num"] = format_number
    return env


def format_number(value: Any) -> str:
    if value is None:
        return ""
    try:
        f = float(value)
    except (TypeError, ValueError):
        return str(value)
    if not math.isfinite(f):
        return str(f)
    return f"{f:.6g}"


def safe_href(uri: str | None) -> str | None:
    """A link target for a run's output directory or an artifact, or None when it is not safe.

    Only http(s) and file URLs and absolute local paths become links; ``javascript:`` and any
    other scheme stays plain text.
    """
    if not uri:
        return None
    text = uri.strip()
    if text.startswith("/") and not text.startswith("//"):
        return "file://" + quote(text)
    if os.name == "nt" and len(text) > 2 and text[1] == ":":  # pragma: no cover - Windows paths
        return "file:///" + quote(text.replace("\\", "/"))
    scheme = urlsplit(text).scheme.lower()
    if scheme in SAFE_SCHEMES and not any(ch in text for ch in "\x00\r\n\t"):
        return text
    return None


def script_safe(text: str) -> str:
    """Inline-able script text: nothing in it can end the surrounding ``<script>`` element."""
    return text.replace("</script", "<\\/script").replace("</SCRIPT", "<\\/SCRIPT").replace("<!--", "<\\!--")


def json_for_script(snapshot: dict[str, Any]) -> str:
    from .snapshot import to_json

    text = to_json(snapshot, indent=None)
    return (
        text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
        .replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    )


def _sha256_source(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def _view(snapshot: dict[str, Any]) -> dict[str, Any]:
    """Display-only fields derived from the snapshot (the embedded JSON stays the snapshot)."""
    import json

    view = dict(snapshot)
    runs = []
    for run in snapshot.get("runs", []):
        r = dict(run)
        r["output_href"] = safe_href(run.get("output_dir"))
        r["configs"] = [
            {**c, "pretty": json.dumps(c.get("config"), indent=2, sort_keys=True, ensure_ascii=False)}
            for c in run.get("configs", [])
        ]
        r["artifacts"] = [
            {**a, "href": safe_href(a.get("durable_ref") or a.get("uri"))} for a in run.get("artifacts", [])
        ]
        r.setdefault("success_reasons", [])
        runs.append(r)
    view["runs"] = runs
    charts = []
    for chart in snapshot.get("charts", []):
        c = dict(chart)
        c["series"] = [
            {**s, "latest_display": format_number(s["values"][-1]) if s["values"] else "–"} for s in chart["series"]
        ]
        c.setdefault("unit", None)
        charts.append(c)
    view["charts"] = charts
    return view


def render_html(snapshot: dict[str, Any], *, series_path: str = "") -> str:
    """The page for ``snapshot``. ``series_path`` enables zoom detail when the page is served."""
    import markupsafe

    from taugrid_portal import __version__

    assets = vendor_assets()
    page_js = script_safe((TEMPLATES / "stellar.js").read_text(encoding="utf-8"))
    uplot_js = script_safe(assets["js"])
    csp = "; ".join([
        "default-src 'none'",
        f"script-src {_sha256_source(uplot_js)} {_sha256_source(page_js)}",
        "style-src 'unsafe-inline'",
        "img-src data:",
        "connect-src 'self'" if series_path else "connect-src 'none'",
        "base-uri 'none'",
        "form-action 'none'",
    ])
    template = _environment().get_template("stellar.html.j2")
    page: str = template.render(
        snapshot=_view(snapshot),
        snapshot_json=markupsafe.Markup(json_for_script(snapshot)),
        uplot_js=markupsafe.Markup(uplot_js),
        page_js=markupsafe.Markup(page_js),
        uplot_css=markupsafe.Markup(assets["css"].replace("</style", "<\\/style")),
        page_css=markupsafe.Markup((TEMPLATES / "stellar.css").read_text(encoding="utf-8")),
        csp=csp,
        series_path=series_path,
        version=__version__,
        uplot_version=assets["version"],
    )
    return page
