"""The bad-input corpus at the library level: every invalid config raises ConfigValidationError (or
another TauError for managed manifests) whose issues name the expected field, a real position and a hint.
The CLI-level run of the same corpus is in tau-plugins/tau-run/tests/test_run_corpus.py."""

from __future__ import annotations

from pathlib import Path

import pytest

from tau_core.config import ConfigValidationError, load_config
from tau_core.errors import TauError

CORPUS = Path(__file__).parent / "corpus"
INVALID = sorted((CORPUS / "invalid").glob("*.yaml"))
MALFORMED = sorted((CORPUS / "malformed").glob("*.yaml"))


def _expect(path: Path) -> str:
    first = path.read_bytes().split(b"\n", 1)[0].decode("utf-8", "replace")
    assert first.startswith("# expect: "), f"{path.name} lacks its '# expect:' header"
    return first.removeprefix("# expect: ").strip()


def test_corpus_is_large_enough() -> None:
    assert len(INVALID) >= 60
    assert len(MALFORMED) >= 8


@pytest.mark.parametrize("path", INVALID, ids=[p.stem for p in INVALID])
def test_invalid_config_names_its_field(path: Path) -> None:
    expected = _expect(path)
    with pytest.raises(ConfigValidationError) as exc:
        load_config(path, display=path.name)
    issues = [i for i in exc.value.issues if i.path == expected]
    assert issues, [i.format() for i in exc.value.issues]
    assert all(i.line >= 2 and i.column >= 1 for i in issues)  # line 1 is the '# expect' comment
    assert all(i.hint for i in exc.value.issues)
    assert all(i.file == path.name for i in exc.value.issues)


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_malformed_file_is_a_clean_error(path: Path) -> None:
    with pytest.raises(TauError) as exc:
        load_config(path, display=path.name)
    assert _expect(path) in exc.value.message
