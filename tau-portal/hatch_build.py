"""Hatchling build hook: bundle the Stellar chart library (uPlot, from npm) at build time.

The repository holds only our own code. uPlot is declared in ``frontend/package.json``
(version pinned, integrity pinned in ``frontend/package-lock.json``); this hook runs
``npm ci`` and copies ``uPlot.iife.min.js``, ``uPlot.min.css`` and uPlot's LICENSE into
``src/taugrid_portal/stellar/vendor/`` (gitignored). It runs for wheels and for editable
installs (``pip install -e tau-portal``), and the vendor files are shipped in the wheel as
build artifacts.

Set ``TAU_PORTAL_SKIP_FRONTEND=1`` to skip the npm step when the vendor directory is already
populated (offline rebuilds); the hook still refuses to build a wheel without the files.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

VENDOR_REL = "src/taugrid_portal/stellar/vendor"
FILES = {
    "uPlot.iife.min.js": "dist/uPlot.iife.min.js",
    "uPlot.min.css": "dist/uPlot.min.css",
    "LICENSE.uPlot": "LICENSE",
}


class StellarFrontendHook(BuildHookInterface):  # type: ignore[misc]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        root = Path(self.root)
        vendor = root / VENDOR_REL
        frontend = root / "frontend"
        wanted = _pinned_version(frontend)
        if not _vendor_current(vendor, wanted):
            if os.environ.get("TAU_PORTAL_SKIP_FRONTEND") == "1":
                raise RuntimeError(
                    f"{vendor} is missing or stale (want uPlot {wanted}) and TAU_PORTAL_SKIP_FRONTEND=1 "
                    "forbids running npm; unset it so the build can run `npm ci` in tau-portal/frontend"
                )
            _install(frontend, vendor, wanted, self.app)
        build_data.setdefault("artifacts", []).append(f"{VENDOR_REL}/*")


def _pinned_version(frontend: Path) -> str:
    package = json.loads((frontend / "package.json").read_text(encoding="utf-8"))
    return str(package["dependencies"]["uplot"])


def _vendor_current(vendor: Path, wanted: str) -> bool:
    stamp = vendor / "VERSION"
    if not stamp.is_file() or stamp.read_text(encoding="utf-8").strip() != f"uplot {wanted}":
        return False
    return all((vendor / name).is_file() and (vendor / name).stat().st_size > 0 for name in FILES)


def _install(frontend: Path, vendor: Path, wanted: str, app: Any) -> None:
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError(
            "building taugrid-portal needs npm (Node.js) to fetch uPlot for Stellar; "
            "install Node.js >= 18 (e.g. `apt-get install -y nodejs npm`) and rebuild"
        )
    app.display_info(f"stellar: installing uPlot {wanted} with npm ci")
    modules = frontend / "node_modules"
    cmd = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
    proc = subprocess.run(cmd, cwd=frontend, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"`npm ci` in {frontend} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    package_dir = modules / "uplot"
    installed = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))["version"]
    if installed != wanted:
        raise RuntimeError(f"npm installed uPlot {installed}, expected the pinned {wanted}")
    vendor.mkdir(parents=True, exist_ok=True)
    # Copy into a temp dir beside vendor/ and move each file in atomically, so an interrupted
    # build never leaves a truncated bundle that looks complete.
    with tempfile.TemporaryDirectory(dir=vendor) as tmp:
        for name, rel in FILES.items():
            src = package_dir / rel
            if not src.is_file():
                raise RuntimeError(f"uPlot {wanted} has no {rel}; the pinned package layout changed")
            shutil.copyfile(src, Path(tmp) / name)
            os.replace(Path(tmp) / name, vendor / name)
        stamp = Path(tmp) / "VERSION"
        stamp.write_text(f"uplot {wanted}\n", encoding="utf-8")
        os.replace(stamp, vendor / "VERSION")
