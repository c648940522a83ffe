"""tau_core.envvars is the one table of environment variables: it must match what the code reads."""

from __future__ import annotations

import re
from pathlib import Path

from tau_core.envvars import ENV_VARS, EXIT_CODES, EXIT_USAGE
from tau_core.errors import TauError, UsageError

REPO = Path(__file__).resolve().parents[2]
SOURCES = [p for root in ("tau-core/src", "tau-plugins", "tau-portal/src", "tau-controller/src")
           for p in (REPO / root).rglob("*.py")
           if "/tests/" not in str(p) and "tau_testing" not in str(p) and "/benchmarks/" not in str(p)
           and p.name not in {"envvars.py", "_schema_compiled.py"} and "/src/" in str(p)]
#: a read of a TAU_ variable: os.environ.get("X"), os.getenv("X"), os.environ["X"], env("X", ...), and the
#: ENV_* constants the readers use
READ = re.compile(r'(?:environ\.get\(|getenv\(|environ\[|\benv\(|\bENV_\w+(?::\s*Final)?\s*=\s*)"((?:TAU|AZURE)_[A-Z_]+)"')


def _code() -> dict[Path, str]:
    return {p: p.read_text() for p in SOURCES}


def test_every_variable_the_code_reads_is_in_the_table() -> None:
    listed = {v.name for v in ENV_VARS}
    read = {name: path for path, text in _code().items() for name in READ.findall(text)}
    missing = {name: str(path.relative_to(REPO)) for name, path in read.items() if name not in listed}
    assert not missing, f"add these to tau_core/envvars.py: {missing}"


def test_every_listed_variable_occurs_in_the_code() -> None:
    text = "\n".join(_code().values())
    stale = [v.name for v in ENV_VARS if f'"{v.name}"' not in text and f"'{v.name}'" not in text]
    assert not stale, f"tau_core/envvars.py lists variables no code uses: {stale}"


def test_names_are_unique_and_described() -> None:
    names = [v.name for v in ENV_VARS]
    assert len(names) == len(set(names))
    assert all(v.summary.strip() for v in ENV_VARS)
    assert [c.code for c in EXIT_CODES] == sorted({c.code for c in EXIT_CODES})


def test_the_cli_exit_codes_come_from_the_table() -> None:
    assert TauError("x").exit_code in {c.code for c in EXIT_CODES}
    assert UsageError("x").exit_code == EXIT_USAGE
