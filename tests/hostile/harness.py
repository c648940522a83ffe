"""The hostile-input harness: a sandbox, the case table (``cases.toml``) and the checks every case must pass.

Every CLI entry point (``tau`` and ``taugrid-portal``) runs in a subprocess over the corpus in
``corpus/`` plus generated files (too big to commit: a 960 KB list config, a 900,000-character
key, 1,000-deep JSONL, 3 x 10,000-metric rows...).  For every case:

* no ``internal error`` and no ``Traceback``;
* the exit code is in the case's ``exit`` list (default ``[0, 1, 2]``; ``130`` after an interrupt);
* nothing outside the sandbox changed (the ``outside`` directory that hostile symlinks point at,
  and the sandbox's parent directory, are compared before and after);
* no raw control bytes on stdout or stderr (C0 except tab/newline, DEL, C1);
* optional expectations: ``stdout_has``/``stderr_has``/``stdout_lacks``/``stderr_lacks``, ``max_stderr``.

Used by ``test_hostile.py`` (one test per case) and by ``benchmarks/bench_hostile.py`` (case count,
total runtime).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
CORPUS = HERE / "corpus"
SECRET = "root:*:19000:0:99999:7:::"
ENTRY = {"tau": "from tau_core.cli import main; main()",
         "taugrid-portal": "from taugrid_portal.cli import main; main()"}
CONTROL = re.compile(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]")
ALLOWED_EXIT = [0, 1, 2]


@dataclass
class Case:
    id: str
    argv: list[str]
    defect: str = "new"
    cwd: str = "{repo}"
    env: dict[str, str] = field(default_factory=dict)
    exit: list[int] = field(default_factory=lambda: list(ALLOWED_EXIT))
    stdout_has: list[str] = field(default_factory=list)
    stderr_has: list[str] = field(default_factory=list)
    stdout_lacks: list[str] = field(default_factory=list)
    stderr_lacks: list[str] = field(default_factory=list)
    max_stderr: int = 0
    interrupt_after: float = 0.0
    binary: bool = False
    timeout: float = 120.0


@dataclass
class Outcome:
    case: Case
    returncode: int
    stdout: bytes
    stderr: bytes
    seconds: float
    problems: list[str]


def load_cases(path: Path = HERE / "cases.toml") -> list[Case]:
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    cases = [Case(**entry) for entry in data["case"]]
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases


# -- the sandbox ----------------------------------------------------------------------------------

@dataclass
class Sandbox:
    root: Path
    run: str = ""

    @property
    def places(self) -> dict[str, str]:
        r = self.root
        return {"root": str(r), "repo": str(r / "repo"), "outside": str(r / "outside"), "store": str(r / "store"),
                "data": str(r / "data"), "gen": str(r / "gen"), "corpus": str(CORPUS), "run": self.run,
                "A5000": "a" * 5000, "A300": "a" * 300, "K10000": "k" * 10000}

    def expand(self, text: str) -> str:
        for key, value in self.places.items():
            text = text.replace("{" + key + "}", value)
        return text

    def env(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        r = self.root
        keep = {k: v for k, v in os.environ.items()
                if not k.startswith(("TAU_", "XDG_", "KUBECONFIG")) and k not in ("HOME", "TMPDIR")}
        env = {**keep, "HOME": str(r / "home"), "TMPDIR": str(r / "tmp"), "XDG_DATA_HOME": str(r / "home/.local"),
               "XDG_CONFIG_HOME": str(r / "home/.config"), "TAU_CONFIG_DIR": str(r / "home/.config/tau"),
               "TAU_DATA_DIR": str(r / "data"), "TAU_EXP_STORE": str(r / "store"),
               "KUBECONFIG": str(r / "no-kubeconfig"), "NO_COLOR": "1", "PYTHONUNBUFFERED": "1"}
        env.update({k: self.expand(v) for k, v in (extra or {}).items()})
        return env

    def cli(self, *argv: str, cwd: Path | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-c", ENTRY[argv[0]], *argv[1:]]
        proc = subprocess.run(cmd, cwd=cwd or self.root / "repo", env=self.env(), capture_output=True, text=True,
                              timeout=300)
        if check and proc.returncode != 0:
            raise RuntimeError(f"sandbox setup failed: {argv}: {proc.stderr}")
        return proc


def _generate(gen: Path, repo: Path) -> None:
    """The big and deep files (generated, deterministic)."""
    gen.mkdir(parents=True, exist_ok=True)
    tau = repo / "tau"
    (tau / "biglist.yaml").write_text("name: biglist\nitems: [" + ",".join("1" for _ in range(480_000)) + "]\n")
    (tau / "biglist-tab.yaml").write_text("name: biglist\nitems: [" + ",".join("1" for _ in range(240_000))
                                          + "]\n\t# a tab defeats the fast path\n")
    (tau / "bigint.yaml").write_text("name: bigint\nengine: job\nentrypoint: ../noisy.py\nrun:\n"
                                     "  ttl_seconds_after_finished: " + "9" * 5000 + "\n")
    (tau / "bigint4000.yaml").write_text("name: bigint\nengine: job\nentrypoint: ../noisy.py\nrun:\n"
                                         "  ttl_seconds_after_finished: " + "9" * 4000 + "\n")
    (tau / "longkey.yaml").write_text("name: longkey\n" + "k" * 900_000 + ": 1\n")
    (tau / "manykeys.yaml").write_text("name: many\n" + "".join(f"unknown_{i}: {i}\n" for i in range(10_000)))
    deep = "name: deep\nx: " + "[" * 200 + "]" * 200 + "\n"
    (tau / "deep.yaml").write_text(deep)
    (gen / "nines.jsonl").write_text('{"_step": 1, "loss": ' + "9" * 400 + "}\n")
    (gen / "deep1000.jsonl").write_text('{"_step": 1, "loss": 1.0, "x": ' + "[" * 1000 + "]" * 1000 + "}\n")
    (gen / "deep100000.jsonl").write_text('{"_step": 1, "loss": 1.0, "x": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    (gen / "objdeep.jsonl").write_text('{"_step": 1, "loss": 1.0, "x": ' + '{"a": ' * 5000 + "1" + "}" * 5000 + "}\n")
    (gen / "wide.jsonl").write_text("".join(json.dumps({"_step": s, **{f"metric_{i:05d}": s + i / 10
                                                                       for i in range(10_000)}}) + "\n"
                                            for s in range(3)))
    (gen / "longline.jsonl").write_text('{"_step": 0, "loss": 1, "pad": "' + "x" * (17 << 20) + '"}\n')


def build(root: Path) -> Sandbox:
    """Create the sandbox under ``root``: repository, outside directory, store, one finished local run."""
    sb = Sandbox(root)
    for d in ("home", "tmp", "data", "outside/elsewhere"):
        (root / d).mkdir(parents=True, exist_ok=True)
    outside = root / "outside"
    (outside / "secret.txt").write_text(SECRET + "\n")
    (outside / "secret.py").write_text(f"# {SECRET}\nprint('host file')\n")
    repo = root / "repo"
    shutil.copytree(CORPUS / "repo", repo)
    for tmpl in (repo / "tau").glob("*.in"):
        tmpl.with_suffix("").write_text(sb.expand(tmpl.read_text()))
        tmpl.unlink()
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / "tau" / "shadow.yaml").symlink_to(outside / "secret.txt")
    (repo / "scaffold-out").mkdir()
    (repo / "scaffold-out" / "tau").symlink_to(outside / "elsewhere")
    (repo / "link-out").symlink_to(outside)
    _generate(root / "gen", repo)
    sb.cli("taugrid-portal", "experiment", "init", "hostile", "--store", str(root / "store"))
    sb.cli("tau", "run", "noisy", "--local", "--follow")
    runs = json.loads(sb.cli("tau", "run", "list", "-o", "json").stdout)
    sb.run = runs[0]["name"]
    return sb


def fingerprint(sb: Sandbox) -> dict[str, tuple[int, int]]:
    """What must not change: the ``outside`` tree and the sandbox's parent directory."""
    out: dict[str, tuple[int, int]] = {}
    for base in (sb.root / "outside",):
        for dirpath, dirnames, filenames in os.walk(base):
            for name in dirnames + filenames:
                p = Path(dirpath) / name
                st = p.lstat()
                out[str(p)] = (st.st_size, st.st_mtime_ns)
    for p in sb.root.parent.iterdir():
        out[str(p)] = (0, 0)
    return out


# -- one case ---------------------------------------------------------------------------------------

def run_case(case: Case, sb: Sandbox) -> Outcome:
    argv = [sb.expand(a) for a in case.argv]
    cmd = [sys.executable, "-c", ENTRY[argv[0]], *argv[1:]]
    before = fingerprint(sb)
    start = time.monotonic()
    proc = subprocess.Popen(cmd, cwd=sb.expand(case.cwd), env=sb.env(case.env), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, stdin=subprocess.DEVNULL)
    if case.interrupt_after:
        try:
            out, err = proc.communicate(timeout=case.interrupt_after)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=case.timeout)
    else:
        try:
            out, err = proc.communicate(timeout=case.timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
    seconds = time.monotonic() - start
    return Outcome(case, proc.returncode, out, err, seconds, check(case, proc.returncode, out, err, before,
                                                                   fingerprint(sb)))


def check(case: Case, code: int, out: bytes, err: bytes, before: dict[str, Any], after: dict[str, Any]) -> list[str]:
    problems = []
    text_out, text_err = out.decode("utf-8", "replace"), err.decode("utf-8", "replace")
    if "internal error" in text_out + text_err:
        problems.append("internal error")
    if "Traceback" in text_out + text_err:
        problems.append("traceback")
    allowed = case.exit + ([130] if case.interrupt_after else [])
    if code not in allowed:
        problems.append(f"exit code {code} not in {allowed}")
    if before != after:
        changed = sorted(set(before.items()) ^ set(after.items()))
        problems.append(f"wrote outside the sandbox: {changed[:5]}")
    for name, blob in (("stdout", out), ("stderr", err)):
        if name == "stdout" and case.binary:
            continue
        m = CONTROL.search(blob)
        if m:
            problems.append(f"raw control byte {m.group(0)!r} on {name} at {m.start()}")
    for want in case.stdout_has:
        if want not in text_out:
            problems.append(f"stdout lacks {want!r}")
    for want in case.stderr_has:
        if want not in text_err:
            problems.append(f"stderr lacks {want!r}")
    for bad in case.stdout_lacks:
        if bad in text_out:
            problems.append(f"stdout has {bad!r}")
    for bad in case.stderr_lacks:
        if bad in text_err:
            problems.append(f"stderr has {bad!r}")
    if case.max_stderr and len(err) > case.max_stderr:
        problems.append(f"stderr is {len(err)} bytes (limit {case.max_stderr})")
    return problems
