"""The storage-backend interface: locations, the registry, and the built-in file:// backend."""

from __future__ import annotations

import multiprocessing
import os
from pathlib import Path

import pytest

from tau_core.errors import NotFoundError, UsageError
from tau_core.hookspecs import hookimpl
from tau_core.plugins import Host
from tau_core.storage import (
    AlreadyExistsError,
    PreconditionFailedError,
    check_key,
    open_store,
    parse_location,
)
from tau_core.storage.registry import redact


def _host(*plugins: object) -> Host:
    return Host.create(entry_points=False, extra_plugins=[(type(p).__name__, p) for p in plugins], env={})


@pytest.mark.parametrize("url, message", [
    ("az://acct/cont?sv=2024-01-01&sig=abc", "credentials are not accepted"),
    ("az://acct/cont/p?se=2030", "credentials are not accepted"),
    ("https://acct.blob.core.windows.net/c?sig=x", "credentials are not accepted"),
    ("DefaultEndpointsProtocol=https;AccountName=a;AccountKey=abc", "account keys are not accepted"),
    ("http://example.com/x", "plain http://"),
    ("az://user:key@acct/cont", "user credentials"),
    ("az://acct", "az://<account>/<container>"),
    ("az://acct/cont/../../etc", "not a canonical relative path"),
    ("az://ACCT/cont", "lowercase"),
    ("file://", "file://<dir>"),
    ("s3bucket", "--registry must be"),
])
def test_hostile_locations_are_refused(url, message):
    with pytest.raises(UsageError) as info:
        parse_location(url)
    assert message in str(info.value)
    assert "abc" not in str(info.value) and "sig=x" not in str(info.value)


def test_locations_parse():
    loc = parse_location("az://acct/cont/some/prefix")
    assert (loc.backend, loc.account, loc.container, loc.prefix) == ("az", "acct", "cont", "some/prefix")
    assert parse_location("file:///srv/reg").path == "/srv/reg"
    assert parse_location("pvc").backend == "pvc"
    assert parse_location("mem://bucket/p").prefix == "bucket/p"
    assert redact("az://a/c?sig=secret") == "az://a/c?<redacted>"


@pytest.mark.parametrize("key", ["", "/abs", "a/../b", "a//b", "./a", "a\\b", "a/\x00"])
def test_check_key_refuses_non_canonical_keys(key):
    with pytest.raises(UsageError):
        check_key(key)


def test_unknown_scheme_names_installed_backends():
    with pytest.raises(UsageError) as info:
        open_store("gcs://bucket", host=_host())
    assert "no storage backend is registered for 'gcs'" in str(info.value)
    assert "file" in (info.value.hint or "")


def test_third_party_backend_is_reached_through_the_hook(tmp_path):
    made = []

    class Plugin:
        @hookimpl
        def tau_register_storage_backends(self, register):
            def factory(url, location, **options):
                made.append((url, location.prefix, options))
                return open_store(f"file://{tmp_path}", host=_host())
            register("acme", factory)

    store = open_store("acme://bucket/reg", host=_host(Plugin()), region="x")
    store.create("k.json", b"{}")
    assert made == [("acme://bucket/reg", "bucket/reg", {"region": "x"})]
    assert (tmp_path / "k.json").read_bytes() == b"{}"


def test_file_store_primitives(tmp_path):
    store = open_store(f"file://{tmp_path}/reg", host=_host())
    etag = store.create("a/b.json", b"one")
    with pytest.raises(AlreadyExistsError):
        store.create("a/b.json", b"two")
    assert store.read("a/b.json").data == b"one"
    with pytest.raises(PreconditionFailedError):
        store.swap("a/b.json", b"two", "not-the-etag")
    with pytest.raises(PreconditionFailedError):
        store.swap("a/b.json", b"two", None)
    new = store.swap("a/b.json", b"two", etag)
    assert store.read("a/b.json") .data == b"two" and new != etag
    with pytest.raises(PreconditionFailedError):
        store.delete("a/b.json", expect=etag)
    assert [i.key for i in store.list()] == ["a/b.json"]
    assert store.hash("a/b.json") == ("3fc4ccfe745870e2c0d99f71f30ff0656c8dedd41cc1d7d3d376b0dbe685e2f3", 3)
    store.delete("a/b.json", expect=new)
    assert store.list() == [] and not (tmp_path / "reg" / "a").exists()
    with pytest.raises(NotFoundError):
        store.read("a/b.json")


def test_file_store_refuses_escaping_symlinks(tmp_path):
    root = tmp_path / "reg"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    (tmp_path / "outside" / "secret").write_bytes(b"s")
    os.symlink(tmp_path / "outside", root / "link")
    store = open_store(f"file://{root}", host=_host())
    for call in (lambda: store.read("link/secret"), lambda: store.create("link/new", b"x"), store.list):
        with pytest.raises(UsageError, match="escapes the root"):
            call()
    assert not (tmp_path / "outside" / "new").exists()


def _race(root: str, key: str, value: bytes, etag: str, barrier, results) -> None:  # type: ignore[no-untyped-def]
    store = open_store(f"file://{root}", host=_host())
    barrier.wait()
    try:
        store.swap(key, value, etag)
        results.put("won")
    except PreconditionFailedError:
        results.put("conflict")


def test_file_store_cas_between_processes(tmp_path):
    store = open_store(f"file://{tmp_path}", host=_host())
    etag = store.create("alias.json", b"v0")
    ctx = multiprocessing.get_context("fork")
    barrier, results = ctx.Barrier(4), ctx.Queue()
    procs = [ctx.Process(target=_race, args=(str(tmp_path), "alias.json", f"v{i}".encode(), etag, barrier, results))
             for i in range(1, 5)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    outcomes = sorted(results.get(timeout=5) for _ in procs)
    assert outcomes == ["conflict", "conflict", "conflict", "won"]
    assert store.read("alias.json").data in {b"v1", b"v2", b"v3", b"v4"}
    assert not [p for p in Path(tmp_path).iterdir() if p.name.endswith(".tmp")]
