"""Repeat every ``realclock`` test under CPU load and report failures per test (``nox -s flaky``).

    python tests/tools/flaky.py [--rounds 20] [--slow] [--workers 3] [--load N] [-- extra pytest args]

Each round runs every test marked ``realclock`` (``--slow`` adds those also marked ``slow``) once, through
pytest-repeat and pytest-xdist, while ``--load`` busy-loop processes (default: one per core) keep the
machine's cores saturated, so a test that relies on scheduling luck shows it here rather than in CI.
A repetition that hangs fails after ``--timeout`` seconds (pytest-timeout) instead of stalling the run.
The load generator is started and stopped by this script, also when the run fails or is interrupted.
Exit status 1 when any repetition failed.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BUSY = "while True:\n    pass\n"


def parse(argv: list[str]) -> tuple[argparse.Namespace, list[str]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20, help="repetitions of each test (default 20)")
    parser.add_argument("--slow", action="store_true", help="include realclock tests also marked slow")
    parser.add_argument("--workers", default="3",
                        help="pytest-xdist workers (default 3: one more than the busy cores, so the tests' own "
                             "processes compete with each other as well as with the load)")
    parser.add_argument("--timeout", type=int, default=300,
                        help="seconds before one repetition counts as hung and fails (pytest-timeout; default 300)")
    parser.add_argument("--load", type=int, default=os.cpu_count() or 2,
                        help="busy-loop processes kept running meanwhile (default: one per core)")
    args, rest = parser.parse_known_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    return args, [a for a in rest if a != "--"]


def _without_repetition(test_id: str) -> str:
    """``test_x[3-20]`` -> ``test_x``; ``test_x[case-3-20]`` -> ``test_x[case]`` (pytest-repeat's suffix)."""
    match = re.fullmatch(r"(.*)\[(?:(.*)-)?\d+-\d+\]", test_id)
    if not match:
        return test_id
    base, params = match.groups()
    return f"{base}[{params}]" if params else base


def results(junit: Path) -> tuple[Counter[str], Counter[str], dict[str, str], dict[str, float]]:
    """Passes, failures and seconds per test (repetition suffix removed) and the first failure text of each."""
    seconds: dict[str, float] = {}
    passed: Counter[str] = Counter()
    failed: Counter[str] = Counter()
    first: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = _without_repetition(f"{case.get('classname')}::{case.get('name')}")
        seconds[name] = seconds.get(name, 0.0) + float(case.get("time") or 0)
        problem = case.find("failure")
        if problem is None:
            problem = case.find("error")
        if problem is not None:
            failed[name] += 1
            first.setdefault(name, (problem.get("message") or "").splitlines()[0][:200] if problem.get("message")
                             else "")
        elif case.find("skipped") is None:
            passed[name] += 1
    return passed, failed, first, seconds


def main(argv: list[str]) -> int:
    args, extra = parse(argv)
    marker = "realclock" if args.slow else "realclock and not slow"
    load = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(max(0, args.load))]
    started = time.monotonic()
    try:
        with tempfile.TemporaryDirectory(prefix="tau-flaky-") as tmp:
            junit = Path(tmp) / "junit.xml"
            command = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-m", marker, "-q",
                       "--count", str(args.rounds), "-n", args.workers, "--dist", "loadgroup",
                       "--timeout", str(args.timeout), "--timeout-method", "signal",
                       f"--junitxml={junit}", "-o", "junit_family=xunit1", *extra]
            print(f"flaky: {args.rounds} round(s) of `{marker}` tests with {len(load)} busy core(s): "
                  + " ".join(command[1:]), flush=True)
            code = subprocess.call(command, cwd=ROOT)
            if not junit.is_file():
                print(f"flaky: pytest wrote no report (exit {code})")
                return 1
            passed, failed, first, seconds = results(junit)
    finally:
        for proc in load:
            proc.terminate()
        for proc in load:
            proc.wait()
    minutes = (time.monotonic() - started) / 60
    names = sorted(set(passed) | set(failed))
    width = max((len(n) for n in names), default=10)
    print(f"\nflaky: per test, {args.rounds} round(s) under load ({minutes:.1f} min)")
    for name in names:
        mark = "FLAKY" if failed[name] else "ok"
        print(f"  {name.ljust(width)}  {passed[name]:>3} passed  {failed[name]:>3} failed  "
              f"{seconds.get(name, 0.0):>7.1f} s  {mark}")
        if failed[name]:
            print(f"      first failure: {first.get(name, '')}")
    heaviest = ", ".join(f"{n.rsplit('::', 1)[-1]} {t:.0f} s" for n, t in sorted(seconds.items(), key=lambda kv: -kv[1])[:5])
    print(f"flaky: the heaviest (test time summed over rounds and workers): {heaviest}")
    total_failed = sum(failed.values())
    print(f"flaky: {len(names)} tests, {sum(passed.values())} passed, {total_failed} failed")
    return 1 if total_failed or code not in (0, 5) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
