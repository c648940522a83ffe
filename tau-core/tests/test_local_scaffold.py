"""``scaffold_local_repo``: the ``tau workspace init-repo NAME --local`` capability."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from ruamel.yaml import YAML

from tau_core.backends.local.backend import LocalBackend
from tau_core.backends.local.scaffold import scaffold_local_repo
from tau_core.errors import ConflictError, UsageError
from tau_core.lifecycle import RunRef, SubmitRequest
from tau_core.workspace.descriptor import load_descriptor


def test_scaffold_writes_a_runnable_local_repository(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TAU_DATA_DIR", str(tmp_path / "home"))
    repo = tmp_path / "my-research"
    written = scaffold_local_repo(repo, "my-research")
    rel = sorted(p.relative_to(repo).as_posix() for p in written)
    assert rel == [".gitignore", "README.md", "tau/smoke.yaml", "tau/train.yaml", "tau/workspace.connection.yaml",
                   "train.py"]
    descriptor = load_descriptor(repo / "tau" / "workspace.connection.yaml")
    assert descriptor.access_method == "local"
    smoke = YAML(typ="safe").load((repo / "tau" / "smoke.yaml").read_text())
    assert smoke["metrics"]["history"] == ["metrics/*.jsonl"]
    backend = LocalBackend()
    ref = backend.submit(SubmitRequest(name="smoke", config=smoke, objects=[], context={},
                                       config_path=repo / "tau" / "smoke.yaml")).ref
    st = backend.wait(ref, timeout=60)
    assert st.succeeded, st
    out = Path(st.extra.output_dir)
    assert len(list((out / "metrics").glob("chunk-*.jsonl"))) == 2
    assert json.loads((out / "report.json").read_text())["steps"] == 2
    assert backend.status(RunRef(name="smoke", backend="local")).ref == ref


def test_scaffold_never_overwrites_without_force(tmp_path: Path) -> None:
    repo = tmp_path / "r"
    scaffold_local_repo(repo, "r")
    (repo / "train.py").write_text("# mine\n")
    with pytest.raises(ConflictError, match="refusing to overwrite"):
        scaffold_local_repo(repo, "r")
    assert (repo / "train.py").read_text() == "# mine\n"
    scaffold_local_repo(repo, "r", force=True)
    assert "TauGrid run contract" in (repo / "train.py").read_text()
    with pytest.raises(UsageError, match="DNS label"):
        scaffold_local_repo(tmp_path / "x", "Bad_Name")
    (tmp_path / "file").write_text("")
    with pytest.raises(ConflictError, match="not a directory"):
        scaffold_local_repo(tmp_path / "file", "ok")
