"""Copy the Tau CRDs from deploy/crds (the one source) into the controller chart's crds/ directory.

    python deploy/tools/sync_chart_crds.py [--chart deploy/charts/tau-core-controller]

Helm installs a chart's ``crds/`` files before its templates, and it reads them only from inside the
chart. The copy is a build artifact: ``deploy/charts/tau-core-controller/crds/`` is git-ignored, made by
this script before ``helm package``/``helm install`` from a checkout (``tau cluster install`` runs it for a
local chart under deploy/charts, tests run it), and tests prove the copy is byte-identical to deploy/crds.
A symlink would also load from a directory, but Windows checkouts and some GitOps tools do not keep it.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path

DEPLOY = Path(__file__).resolve().parents[1]
SOURCE = DEPLOY / "crds"
CHART = DEPLOY / "charts" / "tau-core-controller"


def crd_files(source: Path = SOURCE) -> list[Path]:
    return sorted(p for p in source.glob("tau.azure.com_*.yaml"))


def sync(chart: Path = CHART, source: Path = SOURCE) -> list[Path]:
    """Make ``chart/crds`` hold exactly the CRD files of ``source``; returns the written paths."""
    target = chart / "crds"
    target.mkdir(exist_ok=True)
    wanted = {p.name for p in crd_files(source)}
    for stale in target.glob("*.yaml"):
        if stale.name not in wanted:
            stale.unlink()
    written = []
    for path in crd_files(source):
        dest = target / path.name
        if not dest.is_file() or dest.read_bytes() != path.read_bytes():
            shutil.copyfile(path, dest)
        written.append(dest)
    return written


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chart", type=Path, default=CHART)
    args = parser.parse_args(argv)
    for path in sync(args.chart):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
