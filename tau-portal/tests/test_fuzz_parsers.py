"""Byte-level fuzzing of the portal's parsers (issue 19): JSONL history and the store manifest.

Any bytes give rows or a typed TauError (never OverflowError, RecursionError, a polars panic or
a crash); the store manifest and index fail to open with a typed error, never a traceback.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tau_core.errors import TauError
from taugrid_portal.store import ExperimentStore
from taugrid_portal.store.jsonl import read_history

FUZZ = settings(max_examples=int(os.environ.get("TAU_FUZZ_EXAMPLES", "100")), deadline=None,
                suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
JSONL_SEED = b"".join(json.dumps({"_step": s, "_timestamp": 1760000000.0 + s, "loss": 1 / (s + 1),
                                  "acc": s / 10, "note": "x"}).encode() + b"\n" for s in range(6))
TOKENS = [b"[", b"]", b"{", b"}", b'"', b",", b":", b"NaN", b"1e999", b"9" * 400, b"\\u0000", b"\n", b"null",
          b"true", b"[" * 600, b'{"a":' * 300]


def mutated(seed: bytes) -> st.SearchStrategy[bytes]:
    def apply(edits: list[tuple[int, int, bytes]]) -> bytes:
        data = bytearray(seed)
        for pos, cut, insert in edits:
            pos = pos % (len(data) + 1)
            data[pos:pos + cut] = insert
        return bytes(data)

    insert = st.one_of(st.binary(max_size=8), st.sampled_from(TOKENS))
    return st.one_of(st.binary(max_size=600),
                     st.lists(st.tuples(st.integers(0, 1 << 12), st.integers(0, 6), insert), max_size=8).map(apply))


@FUZZ
@given(mutated(JSONL_SEED))
def test_jsonl_history(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "h.jsonl"
    path.write_bytes(data)
    try:
        gen = read_history(path)
        for block in gen:
            frame = block.long()
            assert frame.columns == ["metric_name", "step", "wall_time_us", "value"]
    except TauError as exc:
        assert exc.message


@FUZZ
@given(mutated(b'{"schema_version": "expstore.v7", "kind": "tau.exp.store", "project": "p", '
               b'"created_at": "2025-01-01T00:00:00Z", "updated_at": "2025-01-01T00:00:00Z"}'))
def test_store_manifest(tmp_path_factory, data: bytes) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("store")
    shutil.rmtree(root)
    ExperimentStore.init(root, project="p")[0].close()
    (root / "manifest.json").write_bytes(data)
    try:
        store = ExperimentStore.open(root)
    except TauError as exc:
        assert exc.message
    else:
        store.close()


@FUZZ
@given(st.binary(max_size=2000))
def test_store_index(tmp_path_factory, data: bytes) -> None:  # type: ignore[no-untyped-def]
    root = tmp_path_factory.mktemp("store")
    shutil.rmtree(root)
    ExperimentStore.init(root, project="p")[0].close()
    for extra in ("index.sqlite-wal", "index.sqlite-shm"):
        (root / extra).unlink(missing_ok=True)
    (root / "index.sqlite").write_bytes(data)
    try:
        store = ExperimentStore.open(root)
        store.runs()
        store.close()
    except TauError as exc:
        assert exc.message
