"""Reproducible releases (tests/tools/release.py, ``nox -s release``): one version, byte-identical builds,
checksums, release notes, and no overwriting. The test builds a subset (tau-core, tau-version); the session
builds every distribution."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[2]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tau_release_tool", REPO / "tests" / "tools" / "release.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


release = _load()


def test_every_version_and_pin_equals_the_version_file() -> None:
    assert release.problems(release.version()) == []


def test_a_disagreeing_copy_is_named_and_set_version_fixes_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for rel in ("tau-core/pyproject.toml", "tau-core/src/tau_core/__init__.py", "tau-plugins/tau/pyproject.toml",
                "tau-plugins/tau-version/pyproject.toml", *sorted({rel for rel, _ in release.VERSION_PLACES})):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    (tmp_path / "VERSION").write_text("9.9.9\n")
    monkeypatch.setattr(release, "ROOT", tmp_path)
    monkeypatch.setattr(release, "VERSION_FILE", tmp_path / "VERSION")
    with pytest.raises(release.ReleaseError, match=r"tau-core/pyproject\.toml: version"):
        release.check()
    (tmp_path / "VERSION").write_text((REPO / "VERSION").read_text())
    release.set_version("1.2.3")
    assert release.check() == "1.2.3"
    meta = (tmp_path / "tau-plugins/tau/pyproject.toml").read_text()
    assert '"tau-version==1.2.3"' in meta and '"tau-core[azure]==1.2.3"' in meta
    assert '__version__ = "1.2.3"' in (tmp_path / "tau-core/src/tau_core/__init__.py").read_text()
    umbrella = (tmp_path / "deploy/charts/taugrid/Chart.yaml").read_text()
    assert "\nversion: 1.2.3\n" in umbrella and '\nappVersion: "1.2.3"\n' in umbrella
    assert "  - name: taugrid-core\n    version: 1.2.3\n" in umbrella
    assert "version: 0.18.2" in umbrella  # Kueue's chart keeps its own version
    assert 'tag: "1.2.3"' in (tmp_path / "deploy/charts/tau-core-controller/values.yaml").read_text()
    assert 'appVersion: "0.8.19"' in (tmp_path / "deploy/charts/gpu-monitoring/Chart.yaml").read_text()  # NPD's
    with pytest.raises(release.ReleaseError, match="not a version"):
        release.set_version("latest")


@pytest.mark.slow
def test_two_builds_are_byte_identical_and_tau_version_shows_their_numbers(tmp_path: Path) -> None:
    digests = tmp_path / "digests.json"  # a fixture: no Docker engine here, so `nox -s images` records none
    release.release_values.record(digests, [f"{i.name}=sha256:{n:064x}" for n, i in
                                            enumerate(release.release_values.images(), 1)], release.version())
    out = release.build(tmp_path / "release", ["tau-core", "tau-version"], digests)
    assert "@sha256:" in (out / "images.env").read_text()
    assert "${digest:" not in (out / "values-release.yaml").read_text()
    ver = release.version()
    wheels = sorted(p.name for p in out.glob("*.whl"))
    assert wheels == [f"tau_core-{ver}-py3-none-any.whl", f"tau_version-{ver}-py3-none-any.whl"]
    assert len(list(out.glob("*.tar.gz"))) == 2
    sums = dict(line.split("  ")[::-1] for line in (out / "SHA256SUMS").read_text().splitlines())
    assert set(sums) == {p.name for p in out.iterdir() if p.suffix in {".whl", ".gz"}}
    for name, digest in sums.items():
        assert hashlib.sha256((out / name).read_bytes()).hexdigest() == digest
    notes = (out / "RELEASE-NOTES.md").read_text()
    assert notes.startswith(f"# TauGrid {ver}") and "\n- " in notes.split("## Changes", 1)[1]
    with zipfile.ZipFile(out / f"tau_version-{ver}-py3-none-any.whl") as whl:
        metadata = whl.read(f"tau_version-{ver}.dist-info/METADATA").decode()
    assert f"\nVersion: {ver}\n" in metadata
    tau = Path(sys.executable).parent / "tau"
    shown = json.loads(subprocess.run([str(tau), "version", "-o", "json"], check=True, capture_output=True,
                                      text=True).stdout)
    assert shown["version"] == ver
    assert {p["version"] for p in shown["plugins"] if p["distribution"] == "tau-version"} == {ver}
    # a released version directory is never written again
    before = sorted(p.name for p in out.iterdir())
    with pytest.raises(release.ReleaseError, match="never rebuilt in place"):
        release.build(tmp_path / "release", ["tau-version"])
    assert sorted(p.name for p in out.iterdir()) == before


def test_the_charts_follow_the_version_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A chart's version or appVersion that differs from VERSION fails the check, named with its file."""
    ver = release.version()
    for chart in release.OWN_CHARTS:
        text = (REPO / "deploy/charts" / chart / "Chart.yaml").read_text()
        assert f"\nversion: {ver}\n" in text and f'\nappVersion: "{ver}"\n' in text, chart
    for rel in {rel for rel, _ in release.VERSION_PLACES}:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(REPO / rel, tmp_path / rel)
    monkeypatch.setattr(release, "ROOT", tmp_path)
    chart = tmp_path / "deploy/charts/taugrid-core/Chart.yaml"
    chart.write_text(chart.read_text().replace(f'appVersion: "{ver}"', 'appVersion: "0.3.2"'))
    assert release._place_problems(ver) == [f"deploy/charts/taugrid-core/Chart.yaml: 'appVersion: \"0.3.2\"', not {ver}"]
    chart.write_text("apiVersion: v2\n")
    assert [p.split(": ")[0] for p in release._place_problems(ver)] == ["deploy/charts/taugrid-core/Chart.yaml"] * 2


def test_the_comparison_names_a_differing_file(tmp_path: Path) -> None:
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    for d, content in ((first, b"1"), (second, b"2")):
        (d / "x.whl").write_bytes(content)
        (d / "same.tar.gz").write_bytes(b"s")
    (first / "only-a.whl").write_bytes(b"")
    assert release.compare(first, second) == ["only-a.whl", "x.whl"]
