"""Reproducible release builds (``nox -s release``), and the one version number of the tree.

    python tests/tools/release.py check                 every version and pin equals VERSION
    python tests/tools/release.py set-version 0.6.0     rewrite VERSION, pyprojects, pins, __version__ and charts
    python tests/tools/release.py build [--out DIR] [--only NAME ...] [--digests FILE]
        check, then build each distribution's sdist and wheel twice (clean output directories,
        SOURCE_DATE_EPOCH = the last commit's time), compare the two builds byte for byte, and write
        DIR/<version>/ with the artifacts, SHA256SUMS, RELEASE-NOTES.md and the release values
        (tests/tools/release_values.py: values-release.yaml pinned from the digests file, by default
        dist/images/<version>/digests.json from `nox -s images -- --push`; without one, the template).
        An existing DIR/<version> is never overwritten.

The version is defined once, in ``VERSION`` at the repository root; ``check`` fails on any copy that
differs: a distribution's ``[project] version``, a ``__version__`` literal, a pin of one distribution
of this tree on another (which must be ``==VERSION``), or one of :data:`VERSION_PLACES` (the charts' version
and appVersion, the umbrella chart's pins on its local subcharts, the controller image tag and its kustomize
mirror).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
VERSION_FILE = ROOT / "VERSION"
VERSION_LINE = re.compile(r'^version = "([^"]+)"', re.M)
DUNDER = re.compile(r'^__version__ = "([^"]+)"', re.M)
REQ_NAME = re.compile(r"^\s*([A-Za-z0-9_.\-]+)(\[[^\]]*\])?\s*(.*)$")
#: The charts this tree ships: their chart version and appVersion are VERSION.  gpu-monitoring's chart version
#: is VERSION too, but its appVersion is the Node Problem Detector release it deploys, so it is not listed.
OWN_CHARTS = ("taugrid", "tau-core-controller", "taugrid-core")
#: Every copy of the version outside the Python distributions: (file, pattern whose group 1 is the copy).
VERSION_PLACES: tuple[tuple[str, str], ...] = (
    *((f"deploy/charts/{c}/Chart.yaml", r"^version: (\S+)$") for c in (*OWN_CHARTS, "gpu-monitoring")),
    *((f"deploy/charts/{c}/Chart.yaml", r'^appVersion: "([^"]+)"$') for c in OWN_CHARTS),
    *(("deploy/charts/taugrid/Chart.yaml", rf"^  - name: {c}\n    version: (\S+)$")
      for c in ("tau-core-controller", "taugrid-core", "gpu-monitoring")),
    ("deploy/charts/tau-core-controller/values.yaml", r'^  tag: "([^"]+)"$'),  # the controller image
    ("deploy/kustomize/tau-core-controller/resources.yaml", r"^\s+image: \S+/tau-core-controller:(\S+)$"),
)


class ReleaseError(Exception):
    pass


def _release_values() -> ModuleType:
    """tests/tools/release_values.py (loaded by path: this file runs as a script and is loaded by tests)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("tau_release_values", Path(__file__).with_name("release_values.py"))
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)
    spec.loader.exec_module(module)
    return module


release_values = _release_values()


def version() -> str:
    return VERSION_FILE.read_text().strip()


def distributions() -> dict[str, Path]:
    """name -> directory, like the noxfile's discovery."""
    found: dict[str, Path] = {}
    for path in [ROOT / "tau-core", ROOT / "tau-portal", ROOT / "tau-controller", *sorted(ROOT.glob("tau-plugins/*"))]:
        pyproject = path / "pyproject.toml"
        if pyproject.is_file():
            project = tomllib.loads(pyproject.read_text()).get("project")
            if project:
                found[project["name"]] = path
    return found


def _dunder_files(path: Path) -> list[Path]:
    return [p for p in sorted((path / "src").glob("*/__init__.py")) if DUNDER.search(p.read_text())]


def problems(expected: str) -> list[str]:
    """Every place whose version is not ``expected``."""
    dists = distributions()
    found = []
    for name, path in dists.items():
        project = tomllib.loads((path / "pyproject.toml").read_text())["project"]
        if project.get("version") != expected:
            found.append(f"{path.relative_to(ROOT)}/pyproject.toml: version {project.get('version')!r}")
        for req in project.get("dependencies", []):
            match = REQ_NAME.match(req.split(";")[0].split("#")[0])
            if match and match[1] in dists and match[3].strip() != f"=={expected}":
                found.append(f"{path.relative_to(ROOT)}/pyproject.toml: {name} pins {req!r}, not =={expected}")
        for init in _dunder_files(path):
            match = DUNDER.search(init.read_text())
            if match and match[1] != expected:
                found.append(f"{init.relative_to(ROOT)}: __version__ {match[1]!r}")
    return found + _place_problems(expected)


def _place_problems(expected: str) -> list[str]:
    found = []
    for rel, pattern in VERSION_PLACES:
        path = ROOT / rel
        matches = list(re.finditer(pattern, path.read_text(), re.M)) if path.is_file() else []
        if not matches:
            found.append(f"{rel}: no version where /{pattern}/ expects one")
        found += [f"{rel}: {m[0].strip()!r}, not {expected}" for m in matches if m[1] != expected]
    return found


def check() -> str:
    expected = version()
    bad = problems(expected)
    if bad:
        raise ReleaseError(f"VERSION says {expected} but:\n  " + "\n  ".join(bad)
                           + "\nhint: python tests/tools/release.py set-version " + expected)
    return expected


def set_version(new: str) -> None:
    if not re.fullmatch(r"\d+\.\d+\.\d+([.-]?(a|b|rc|dev|post)\d+)?", new):
        raise ReleaseError(f"'{new}' is not a version like 1.2.3")
    old = version()
    dists = distributions()
    pin = re.compile(r'"(' + "|".join(re.escape(n) for n in dists) + r')(\[[^\]]*\])?==' + re.escape(old) + '"')
    for path in dists.values():
        pyproject = path / "pyproject.toml"
        text = VERSION_LINE.sub(f'version = "{new}"', pyproject.read_text(), count=1)
        pyproject.write_text(pin.sub(lambda m: f'"{m[1]}{m[2] or ""}=={new}"', text))
        for init in _dunder_files(path):
            init.write_text(DUNDER.sub(f'__version__ = "{new}"', init.read_text(), count=1))
    for rel, pattern in VERSION_PLACES:
        path = ROOT / rel
        if path.is_file():
            path.write_text(re.sub(pattern, lambda m: m[0][: m.start(1) - m.start(0)] + new + m[0][m.end(1) - m.start(0):],
                                   path.read_text(), flags=re.M))
    VERSION_FILE.write_text(new + "\n")


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def source_date_epoch() -> str:
    return os.environ.get("SOURCE_DATE_EPOCH") or _git("log", "-1", "--format=%ct")


def clean_source(into: Path) -> Path:
    """The committed tree (``git archive HEAD``) extracted into ``into``: no stray or uncommitted file."""
    into.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", "--format=tar", "HEAD"], check=True,
                             capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


def build_once(names: list[str], source: Path, out: Path, epoch: str) -> None:
    """sdist and wheel of each distribution of the clean tree ``source`` into the empty directory ``out``."""
    dists = distributions()
    env = {**os.environ, "SOURCE_DATE_EPOCH": epoch, "PYTHONHASHSEED": "0"}
    out.mkdir()
    for name in names:
        subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--sdist", "--wheel", "--outdir", str(out),
                        str(source / dists[name].relative_to(ROOT))], check=True, env=env, stdout=subprocess.DEVNULL)


def compare(first: Path, second: Path) -> list[str]:
    """Names of the files that differ between two builds (or exist in one only)."""
    a = {p.name: p for p in first.iterdir()}
    b = {p.name: p for p in second.iterdir()}
    differ = sorted(set(a) ^ set(b))
    differ += sorted(n for n in set(a) & set(b) if a[n].read_bytes() != b[n].read_bytes())
    return differ


def sha256sums(directory: Path) -> str:
    lines = [f"{hashlib.sha256(p.read_bytes()).hexdigest()}  {p.name}" for p in sorted(directory.iterdir())
             if p.is_file() and p.name not in {"SHA256SUMS", "RELEASE-NOTES.md"}]
    return "\n".join(lines) + "\n"


def release_notes(ver: str) -> str:
    try:
        since = _git("describe", "--tags", "--abbrev=0")
        span, origin = f"{since}..HEAD", f"since {since}"
    except subprocess.CalledProcessError:
        span, origin = "HEAD", "since the first commit (no tag yet)"
    log = _git("log", "--no-merges", "--format=- %s (%h)", span)
    return (f"# TauGrid {ver}\n\n## Highlights\n\n- (write the two or three changes users should know about)\n\n"
            f"## Upgrade notes\n\n- (breaking changes, new required values, migrations)\n\n"
            f"## Changes {origin}\n\n{log}\n")


def digests_file(given: Path | None, ver: str) -> Path | None:
    """The image digests to pin: ``given``, else the one `nox -s images -- --push` wrote for ``ver``, if any."""
    default = ROOT / "dist" / "images" / ver / "digests.json"
    return given if given is not None else (default if default.is_file() else None)


def build(out_root: Path, only: list[str] | None, digests: Path | None = None) -> Path:
    ver = check()
    target = out_root / ver
    if target.exists():
        raise ReleaseError(f"{target} exists: a released version is never rebuilt in place "
                           "(hint: bump VERSION with set-version, or remove the directory on purpose)")
    digests = digests_file(digests, ver)
    if digests is not None:  # checked before the long builds
        release_values.read_digests(digests, release_values.images())
    names = only or sorted(distributions())
    epoch = source_date_epoch()
    with tempfile.TemporaryDirectory(prefix="tau-release-") as tmp:
        first, second = Path(tmp, "first"), Path(tmp, "second")
        build_once(names, clean_source(Path(tmp, "src-1")), first, epoch)
        build_once(names, clean_source(Path(tmp, "src-2")), second, epoch)
        differ = compare(first, second)
        if differ:
            raise ReleaseError("the two builds differ: " + ", ".join(differ))
        target.mkdir(parents=True)
        for artifact in sorted(first.iterdir()):
            shutil.copy2(artifact, target / artifact.name)
    (target / "SHA256SUMS").write_text(sha256sums(target))
    (target / "RELEASE-NOTES.md").write_text(release_notes(ver))
    release_values.write(target, digests, ver)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check")
    setv = sub.add_parser("set-version")
    setv.add_argument("version")
    bld = sub.add_parser("build")
    bld.add_argument("--out", type=Path, default=ROOT / "dist" / "release")
    bld.add_argument("--only", action="append")
    bld.add_argument("--digests", type=Path, help="image digests file (default: dist/images/<VERSION>/digests.json)")
    args = parser.parse_args(argv)
    try:
        if args.command == "check":
            print(f"version {check()}: every distribution, pin and __version__ agrees")
        elif args.command == "set-version":
            set_version(args.version)
            print(f"version {check()}")
        else:
            target = build(args.out, args.only, args.digests)
            count = len([p for p in target.iterdir() if p.name.endswith((".whl", ".tar.gz"))])
            print(f"{count} artifacts built twice, byte-identical; written to {target}")
            if not (target / "values-release.yaml").exists():
                print("no image digests (no Docker engine here, or `nox -s images -- --push` not run): wrote "
                      "values-release.template.yaml; fill it with release_values.py write --digests FILE")
    except (ReleaseError, release_values.ValuesError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
