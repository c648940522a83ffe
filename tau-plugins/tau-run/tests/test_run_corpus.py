"""The bad-input corpus through the CLI: every invalid config makes `tau run validate` exit 1, names its
field and position with a hint, and never prints a traceback.  The corpus itself lives with the config
model in tau-core (tau-core/tests/corpus); tau-core's own tests check it at the library level."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

CORPUS = Path(__file__).resolve().parents[3] / "tau-core" / "tests" / "corpus"
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
def test_invalid_config_names_its_field(tau_cli, path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(path.parent)
    expected = _expect(path)
    r = tau_cli("run", "validate", "-c", path.name)
    assert r.exit_code == 1, r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    pattern = re.compile(rf"^error: {re.escape(path.name)}:(\d+):(\d+): {re.escape(expected)}: ", re.M)
    match = pattern.search(r.stderr)
    assert match, f"no error line naming {expected!r} with a position:\n{r.stderr}"
    assert int(match.group(1)) >= 2  # line 1 is the '# expect' comment: the position points at a key
    lines = r.stderr.splitlines()
    located = re.compile(rf"^error: {re.escape(path.name)}:\d+:\d+: ")
    problems = [i for i, line in enumerate(lines) if located.match(line)]
    assert all(lines[i + 1].startswith("  hint: ") for i in problems), r.stderr  # every problem has a hint


@pytest.mark.parametrize("path", MALFORMED, ids=[p.stem for p in MALFORMED])
def test_malformed_file_is_a_clean_error(tau_cli, path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(path.parent)
    r = tau_cli("run", "validate", "-c", path.name)
    assert r.exit_code == 1, r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r
    assert _expect(path) in r.stderr, r
    assert path.name in r.stderr


def test_json_report_lists_every_error(tau_cli, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import json

    path = CORPUS / "invalid" / "env-secret-duplicate.yaml"
    monkeypatch.chdir(path.parent)
    r = tau_cli("run", "validate", "-c", path.name, "-o", "json")
    assert r.exit_code == 1, r
    doc = json.loads(r.stdout)
    assert doc["valid"] is False
    assert doc["errors"][0]["path"] == "runtime.env_secret.A"
    assert {"file", "line", "column", "path", "message", "hint"} <= set(doc["errors"][0])


@pytest.mark.parametrize("setup, expected", [
    (lambda p: p.write_bytes(b"name: big\n" + b"# padding\n" * 120_000), "config files are limited to"),
    (lambda p: p.mkdir(), "is not a regular file"),
    (lambda p: None, "does not exist"),
    (lambda p: p.write_text(""), "a run needs a name"),
    (lambda p: p.write_bytes(b"\xef\xbb\xbfname: [\n"), "invalid YAML"),
    (lambda p: p.write_text("name: x\nengine: job\nruntime:\n  env:\n    A: \"\\ud800\"\n"), "invalid Unicode escape"),
], ids=["huge", "directory", "missing", "empty", "bom-broken", "lone-surrogate"])
def test_hostile_files_are_clean_errors(tau_cli, tmp_path: Path, monkeypatch, setup, expected: str) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.chdir(tmp_path)
    target = tmp_path / "cfg.yaml"
    setup(target)
    r = tau_cli("run", "validate", "-c", "cfg.yaml")
    assert r.exit_code == 1, r
    assert expected in r.stderr, r
    assert "Traceback" not in r.stderr and "internal error" not in r.stderr


def test_cli_never_shows_a_traceback_for_random_documents(tau_cli, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A CLI-level property check: hypothesis drives `tau run validate` itself."""
    import json

    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    monkeypatch.chdir(tmp_path)
    leaf = st.one_of(st.none(), st.booleans(), st.integers(-5, 10**6), st.text(max_size=12))
    doc = st.dictionaries(st.sampled_from(["name", "engine", "compute", "policy", "storage", "runtime", "x"]),
                          st.one_of(leaf, st.dictionaries(st.text(max_size=10), leaf, max_size=3)), max_size=5)

    @settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
    @given(doc)
    def check(data: dict) -> None:  # type: ignore[type-arg]
        (tmp_path / "cfg.yaml").write_text(json.dumps(data))
        r = tau_cli("run", "validate", "-c", "cfg.yaml")
        assert r.exit_code in (0, 1), r
        assert "Traceback" not in r.stderr and "internal error" not in r.stderr, r

    check()
