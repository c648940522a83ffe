"""Regenerate the golden client dry-run output of every example target (the xpk "recipes" model).

    python tests/tools/regen_goldens.py            # rewrite tests/golden/<example>/<target>.yaml
    python tests/tools/regen_goldens.py --check    # exit 1 and print a unified diff when stale

Each golden is exactly what ``tau run <target> --dry-run=client`` prints on stdout when run in
a copy of ``examples/<example>/`` outside any Git checkout (so ``tau.azure.com/code-sha`` does not
change with every commit) with the fixed environment below (no cluster, no kubeconfig, a pinned
metrics-offload image).  ``tests/test_goldens.py`` renders the same way and diffs against them,
so review a golden diff like any other code change: it is the rendered manifest changing.
"""

from __future__ import annotations

import argparse
import contextlib
import difflib
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
EXAMPLES_DIR = REPO / "examples"
GOLDEN_DIR = REPO / "tests" / "golden"
EXAMPLES = ("kind-smoke", "ray-tune-smoke", "portal-ray-stellar", "market-policy", "cpu-multi-interest-ray",
            "sdk-train-eval")
#: Environment every golden is rendered with (decision 7: the offload image comes from the env).
GOLDEN_ENV = {
    "TAU_METRICS_OFFLOAD_IMAGE": "registry.example.com/taugrid/taugrid-portal@sha256:" + "0" * 64,
    "NO_COLOR": "1",
}
#: Variables that would make the output depend on the machine; removed while rendering.
CLEARED_ENV = (
    "TAU_CONTEXT",
    "TAU_METRICS_OFFLOAD_OUT",
    "TAU_METRICS_OFFLOAD_SOURCE",
    "TAU_METRICS_OFFLOAD_INTERVAL",
    "TAU_METRICS_OFFLOAD_REMOTE_WRITE_ENDPOINT",
    "TAU_PLUGINS",
    "TAU_DISABLE_PLUGINS",
    "TAU_TRACE_HOOKS",
    "TAU_TEAM",
    "TAU_SYSTEM_NAMESPACE",
)
REGEN_COMMAND = "python tests/tools/regen_goldens.py"


def targets(example: str) -> list[str]:
    """Target names of an example: ``examples/<example>/tau/*.yaml|yml`` minus the connection descriptor."""
    tau_dir = EXAMPLES_DIR / example / "tau"
    names = [p.stem for p in tau_dir.iterdir() if p.suffix in (".yaml", ".yml") and p.stem != "workspace.connection"]
    return sorted(names)


def cases() -> list[tuple[str, str]]:
    return [(example, target) for example in EXAMPLES for target in targets(example)]


def golden_path(example: str, target: str) -> Path:
    return GOLDEN_DIR / example / f"{target}.yaml"


@contextlib.contextmanager
def _rendering_env(example: str, target: str) -> Iterator[dict[str, str | None]]:
    previous_cwd, previous_argv = Path.cwd(), sys.argv
    with tempfile.TemporaryDirectory(prefix="tau-golden-") as home:
        workdir = Path(home) / "examples" / example
        shutil.copytree(EXAMPLES_DIR / example, workdir, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        env: dict[str, str | None] = {name: None for name in CLEARED_ENV}
        env.update(GOLDEN_ENV)
        env.update(
            {
                "HOME": home,
                "TAU_CONFIG_DIR": f"{home}/config",
                "TAU_DATA_DIR": f"{home}/data",
                "XDG_CONFIG_HOME": f"{home}/.config",
                "KUBECONFIG": f"{home}/no-kubeconfig",
            }
        )
        try:
            os.chdir(workdir)
            sys.argv = ["tau", "run", target, "--dry-run=client"]
            yield env
        finally:
            os.chdir(previous_cwd)
            sys.argv = previous_argv


def render(example: str, target: str) -> str:
    """The client dry-run stdout for one target, rendered in-process through the real CLI."""
    from tau_testing.runner import TauCli

    with _rendering_env(example, target) as env:
        result = TauCli(env=env)("run", target, "--dry-run=client")
    if result.exit_code != 0:
        raise RuntimeError(
            f"tau run {target} --dry-run=client failed in examples/{example} "
            f"(exit {result.exit_code}):\n{result.stderr}"
        )
    return result.stdout


def diff(example: str, target: str, rendered: str) -> str:
    path = golden_path(example, target)
    expected = path.read_text() if path.exists() else ""
    if expected == rendered:
        return ""
    rel = path.relative_to(REPO)
    return "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            rendered.splitlines(keepends=True),
            fromfile=f"{rel} (golden)",
            tofile=f"{rel} (rendered now)",
            n=3,
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true", help="do not write; print diffs and exit 1 when stale")
    args = parser.parse_args(argv)
    stale = 0
    expected_files = set()
    for example, target in cases():
        rendered = render(example, target)
        path = golden_path(example, target)
        expected_files.add(path)
        delta = diff(example, target, rendered)
        if not delta:
            print(f"unchanged {path.relative_to(REPO)}")
            continue
        stale += 1
        if args.check:
            sys.stdout.write(delta)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(rendered)
            print(f"wrote     {path.relative_to(REPO)}")
    for orphan in sorted(set(GOLDEN_DIR.rglob("*.yaml")) - expected_files):
        stale += 1
        if args.check:
            print(f"orphan golden {orphan.relative_to(REPO)} (its target no longer exists)")
        else:
            orphan.unlink()
            print(f"removed   {orphan.relative_to(REPO)}")
    if args.check and stale:
        print(f"{stale} golden file(s) are stale; regenerate with: {REGEN_COMMAND}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
