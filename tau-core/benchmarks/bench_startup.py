"""Start-up cost of the tau CLI (issue: foundation).

Prints the median wall time over N fresh processes of `tau --help` and `tau version`
next to `python -c "import click"` measured in the same run, first with the installed
plugin set, then in a scratch virtual environment that also holds 20 synthetic plugin
distributions. Target: `tau --help` <= 2x the `import click` baseline.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
import venv
from pathlib import Path

RUNS = int(os.environ.get("TAU_BENCH_RUNS", "20"))
TAU = "from tau_core.cli import main; main()"


def median_ms(python: str, args: list[str], env: dict[str, str] | None = None) -> float:
    times = []
    for _ in range(RUNS):
        start = time.perf_counter()
        subprocess.run([python, *args], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def report(label: str, python: str, env: dict[str, str] | None = None) -> None:
    baseline = median_ms(python, ["-c", "import click"], env)
    help_ = median_ms(python, ["-c", TAU, "--help"], env)
    version = median_ms(python, ["-c", TAU, "version"], env)
    print(f"[{label}] import-click-baseline: {baseline:.1f} ms (median of {RUNS})")
    print(f"[{label}] tau-help: {help_:.1f} ms = {help_ / baseline:.2f}x baseline (target <= 2.00x)")
    print(f"[{label}] tau-version: {version:.1f} ms = {version / baseline:.2f}x baseline")


def synthetic_plugins(site: Path, count: int = 20) -> None:
    for i in range(count):
        name = f"taufake{i:02d}"
        (site / f"{name}.py").write_text(textwrap.dedent(f"""
            from tau_core.hookspecs import hookimpl

            @hookimpl
            def tau_register_roots(register):
                register("fake{i:02d}", "{name}_cli:cmd", help="Synthetic root {i}.")
        """))
        (site / f"{name}_cli.py").write_text("import click\n\n@click.command()\ndef cmd():\n    click.echo('ok')\n")
        info = site / f"{name}-1.0.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        (info / "entry_points.txt").write_text(f"[tau]\nfake{i:02d} = {name}\n")


def main() -> None:
    report("installed", sys.executable)
    with tempfile.TemporaryDirectory() as tmp:
        env_dir = Path(tmp) / "venv"
        venv.EnvBuilder(with_pip=False).create(env_dir)
        python = str(env_dir / "bin" / "python")
        site = Path(subprocess.check_output(
            [python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip())
        # Make the current environment's packages (tau and its dependencies) visible, then add 20 plugins.
        here = subprocess.check_output(
            [sys.executable, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"], text=True).strip()
        (site / "_tau_bench_parent.pth").write_text(f"import site; site.addsitedir({here!r})\n")
        synthetic_plugins(site)
        roots = subprocess.run([python, "-c", TAU, "--help"], capture_output=True, text=True, check=True).stdout
        assert "fake19" in roots, "synthetic plugins were not discovered"
        report("with-20-synthetic-plugins", python)


if __name__ == "__main__":
    main()
