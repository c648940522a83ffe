"""Byte-level fuzzing of tau-core's parsers (issue 19): any bytes give data or a typed TauError, never a crash.

Inputs are raw bytes (``st.binary``) and byte-level mutations of valid seed documents (random
insertions, deletions and replacements), so both the early checks and the deep validators are reached.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core.config import load_config
from tau_core.config.targets import load_catalog
from tau_core.errors import TauError
from tau_core.workspace.connection import ConnectionStore
from tau_core.workspace.descriptor import load_descriptor

REPO = Path(__file__).resolve().parents[2]
CONFIG_SEEDS = [p.read_bytes() for p in sorted((REPO / "examples").glob("*/tau*.yaml"))[:6]] + [
    (REPO / "examples" / "quickstart" / "tau" / "train.yaml").read_bytes()]
DESCRIPTOR_SEED = (REPO / "examples" / "quickstart" / "tau" / "workspace.connection.yaml").read_bytes()
CLUSTER_DESCRIPTOR_SEED = (b"schema: tau.workspace.connection.v1\nworkspace: aurora\ncluster:\n  contextName: kind-tau\n"
                           b"access:\n  method: kubeconfig\nauthorization:\n  mode: workspace-rbac\n"
                           b"  requiredRole: tau-researcher-v1\nrequirements:\n  minTauVersion: 0.1.0\n")
CATALOG_SEED = b"schema: tau.projects.v1\nprojects:\n  a:\n    root: services/a\n  b:\n    root: b\n"
FUZZ = settings(max_examples=int(os.environ.get("TAU_FUZZ_EXAMPLES", "100")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def mutated(seeds: list[bytes]) -> st.SearchStrategy[bytes]:
    """Raw bytes, or a seed with up to 6 random byte-level edits."""

    def apply(seed: bytes, edits: list[tuple[int, int, bytes]]) -> bytes:
        data = bytearray(seed)
        for pos, cut, insert in edits:
            pos = pos % (len(data) + 1)
            data[pos:pos + cut] = insert
        return bytes(data)

    edit = st.tuples(st.integers(0, 1 << 16), st.integers(0, 4), st.binary(max_size=8))
    return st.one_of(st.binary(max_size=600),
                     st.builds(apply, st.sampled_from(seeds), st.lists(edit, max_size=6)))


def _write(path: Path, data: bytes) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@FUZZ
@given(mutated(CONFIG_SEEDS))
def test_config_loader(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path / "fuzz" / "tau.yaml", data)
    try:
        load_config(path, check_files=False)
    except TauError as exc:
        assert exc.message and "\n" not in exc.message.splitlines()[0]


@FUZZ
@given(mutated([DESCRIPTOR_SEED, CLUSTER_DESCRIPTOR_SEED]))
def test_workspace_descriptor(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path / "fuzz" / "tau" / "workspace.connection.yaml", data)
    try:
        load_descriptor(path, check_version=False)
    except TauError:
        pass


@FUZZ
@given(mutated([CATALOG_SEED]))
def test_project_catalog(tmp_path: Path, data: bytes) -> None:
    root = tmp_path / "fuzz"
    _write(root / "tau.projects.yaml", data)
    try:
        load_catalog(root)
    except TauError:
        pass


@FUZZ
@given(st.binary(max_size=400))
def test_connection_state_files(tmp_path: Path, data: bytes) -> None:
    """A damaged connection state file reads as "not connected", never as a crash."""
    descriptor_path = _write(tmp_path / "fuzz" / "tau" / "workspace.connection.yaml", DESCRIPTOR_SEED)
    descriptor = load_descriptor(descriptor_path, check_version=False)
    store = ConnectionStore(tmp_path / "cfg")
    _write(store.state_path(descriptor), data)
    assert store.load(descriptor) is None or isinstance(store.load(descriptor), dict)


@pytest.mark.parametrize("data", [b"\x00" * 10, b"\xff\xfe", b"a: b: c", b"[" * 5000, b"{" * 5000, b"&a [*a]",
                                  b"a: !!python/object:os.system 'echo'", b"a: " + b"9" * 5000])
def test_known_nasty_configs(tmp_path: Path, data: bytes) -> None:
    path = _write(tmp_path / "tau.yaml", data)
    with pytest.raises(TauError):
        load_config(path, check_files=False)
