"""Hatchling build hook: bundle the Stellar chart library (uPlot, from npm) at build time.

The repository holds only our own code. uPlot is declared in ``frontend/package.json``
(version pinned, integrity pinned in ``frontend/package-lock.json``); this hook runs
``npm ci`` (or, on a machine without Node.js, downloads the locked tarball from the npm
registry and checks its integrity) and copies ``uPlot.iife.min.js``, ``uPlot.min.css`` and uPlot's LICENSE into
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


def _fetch_locked_tarball(frontend: Path, wanted: str, dest: Path) -> Path:
    """Without npm: download the locked uPlot tarball from the npm registry and check its integrity."""
    import base64
    import hashlib
    import tarfile
    import urllib.request

    lock = json.loads((frontend / "package-lock.json").read_text(encoding="utf-8"))
    entry = lock["packages"]["node_modules/uplot"]
    if entry["version"] != wanted:
        raise RuntimeError(f"package-lock.json pins uPlot {entry['version']}, package.json wants {wanted}")
    registry = os.environ.get("npm_config_registry", "https://registry.npmjs.org").rstrip("/")
    url = entry.get("resolved") or f"{registry}/uplot/-/uplot-{wanted}.tgz"
    with urllib.request.urlopen(url, timeout=60) as response:
        data = response.read()
    algorithm, _, expected = entry["integrity"].partition("-")
    actual = base64.b64encode(hashlib.new(algorithm, data).digest()).decode()
    if actual != expected:
        raise RuntimeError(f"uPlot tarball from {url} does not match its locked integrity")
    archive = dest / "uplot.tgz"
    archive.write_bytes(data)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    return dest / "package"


def _install(frontend: Path, vendor: Path, wanted: str, app: Any) -> None:
    npm = shutil.which("npm")
    with tempfile.TemporaryDirectory() as scratch:
        if npm is None:
            app.display_info(f"stellar: npm not found; fetching the locked uPlot {wanted} tarball")
            package_dir = _fetch_locked_tarball(frontend, wanted, Path(scratch))
        else:
            app.display_info(f"stellar: installing uPlot {wanted} with npm ci")
            cmd = [npm, "ci", "--ignore-scripts", "--no-audit", "--no-fund", "--loglevel=error"]
            proc = subprocess.run(cmd, cwd=frontend, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                detail = proc.stderr.strip()[-2000:]
                raise RuntimeError(f"`npm ci` in {frontend} failed ({proc.returncode}): {detail}")
            package_dir = frontend / "node_modules" / "uplot"
        _copy_vendor(package_dir, vendor, wanted)


def _copy_vendor(package_dir: Path, vendor: Path, wanted: str) -> None:
    installed = json.loads((package_dir / "package.json").read_text(encoding="utf-8"))["version"]
    if installed != wanted:
        raise RuntimeError(f"got uPlot {installed}, expected the pinned {wanted}")
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
