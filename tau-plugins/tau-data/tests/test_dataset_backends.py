"""Every dataset verb on each backend: file://, az:// (Azurite) and a third-party plugin (mem://)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pytest

from tau_core.errors import ConflictError
from tau_core.storage import PreconditionFailedError, open_store
from tau_data.datasets import DatasetRegistry


def _register(tau_cli, registry: str, src: Path, ref: str = "web@1.0", *extra: str):  # type: ignore[no-untyped-def]
    return tau_cli("data", "dataset", "register", ref, "--registry", registry, "--purpose", "pretrain",
                   "--from", str(src), "--tokenizer", "gpt2", *extra)


def test_register_alias_verify_rm_immutable(tau_cli, registry, dataset_dir):  # type: ignore[no-untyped-def]
    first = _register(tau_cli, registry, dataset_dir, "web@1.0", "-o", "json")
    assert first.exit_code == 0, first.stderr
    record = json.loads(first.stdout)
    assert record["total_bytes"] == 4096 + 2048 + 20 and len(record["files"]) == 3
    assert record["pretrain"]["total_tokens"] is None and record["files"][0]["token_count"] == 10

    again = _register(tau_cli, registry, dataset_dir, "web@1.0")
    assert again.exit_code == 1 and "already exists; datasets are immutable" in again.stderr

    cas = ("data", "dataset", "alias", "set", "web", "latest", "1.0", "--registry", registry)
    assert tau_cli(*cas, "--expect-absent").stdout.strip() == "web:latest -> 1.0"
    refused = tau_cli(*cas, "--expect-absent")
    assert refused.exit_code == 1 and "already exists (points at 1.0); --expect-absent not satisfied" in refused.stderr
    assert _register(tau_cli, registry, dataset_dir, "web@1.1").exit_code == 0
    wrong = tau_cli("data", "dataset", "alias", "set", "web", "latest", "1.1", "--registry", registry, "--expect", "0.9")
    assert wrong.exit_code == 1 and "points at 1.0, not 0.9; compare-and-swap aborted" in wrong.stderr
    moved = tau_cli("data", "dataset", "alias", "set", "web", "latest", "1.1", "--registry", registry, "--expect", "1.0")
    assert moved.exit_code == 0, moved
    assert tau_cli("data", "dataset", "alias", "get", "web", "latest", "--registry", registry).stdout.strip() == "web@1.1"
    assert json.loads(tau_cli("data", "dataset", "show", "web", "--registry", registry, "-o", "json").stdout)[
        "version"] == "1.1"

    assert tau_cli("data", "dataset", "verify", "web@1.1", "--registry", registry).exit_code == 0
    shard = dataset_dir / "shards" / "000.bin"
    data = bytearray(shard.read_bytes())
    data[100] ^= 0x01
    shard.write_bytes(bytes(data))
    bad = tau_cli("data", "dataset", "verify", "web@1.1", "--registry", registry, "-o", "json")
    assert bad.exit_code == 1 and "verification FAILED for web@1.1" in bad.stderr
    result = json.loads(bad.stdout)
    assert not result["ok"] and result["mismatches"][0]["path"] == "shards/000.bin"
    alias_rejected = tau_cli("data", "dataset", "verify", "web@latest", "--registry", registry)
    assert alias_rejected.exit_code == 2 and "an exact version, not an alias" in alias_rejected.stderr

    no_yes = tau_cli("data", "dataset", "rm", "web@1.1", "--registry", registry)
    assert no_yes.exit_code == 2 and "refusing to remove web@1.1 without --yes" in no_yes.stderr
    blocked = tau_cli("data", "dataset", "rm", "web@1.1", "--yes", "--registry", registry)
    assert blocked.exit_code == 1 and "referenced by alias 'latest'" in blocked.stderr
    assert tau_cli("data", "dataset", "rm", "web@1.0", "--yes", "--registry", registry).stdout.strip() == \
        "removed web@1.0"
    listed = json.loads(tau_cli("data", "dataset", "list", "--registry", registry, "-o", "json").stdout)
    assert [(r["name"], r["version"]) for r in listed] == [("web", "1.1")]
    unalias = ("data", "dataset", "alias", "remove", "web", "latest", "--registry", registry, "--yes")
    stale = tau_cli(*unalias, "--expect", "1.0")
    assert stale.exit_code == 1 and "points at 1.1, not 1.0" in stale.stderr
    assert tau_cli(*unalias, "--expect", "1.1").stdout.strip() == "removed alias web:latest (was 1.1)"
    assert tau_cli("data", "dataset", "rm", "web@1.1", "--yes", "--registry", registry).exit_code == 0


def test_two_concurrent_alias_writers_exactly_one_wins(tau_cli, tau_plugins, tau_env, registry, dataset_dir,  # type: ignore[no-untyped-def]
                                                       monkeypatch):
    if registry == "pvc":
        monkeypatch.setenv("KUBECONFIG", tau_env["KUBECONFIG"])
    assert _register(tau_cli, registry, dataset_dir, "web@1.0").exit_code == 0
    assert _register(tau_cli, registry, dataset_dir, "web@2.0").exit_code == 0
    host = tau_plugins.host()
    barrier = threading.Barrier(2)
    outcomes: list[str] = []

    def writer(version: str) -> None:
        reg = DatasetRegistry(open_store(registry, host=host))
        barrier.wait()
        try:
            reg.alias_set("web", "prod", version, expect_absent=True)
            outcomes.append(f"won {version}")
        except ConflictError as exc:
            outcomes.append(f"conflict: {exc}")

    threads = [threading.Thread(target=writer, args=(v,)) for v in ("1.0", "2.0")]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(o.split()[0] for o in outcomes) == ["conflict:", "won"], outcomes
    winner = next(o for o in outcomes if o.startswith("won")).split()[1]
    assert DatasetRegistry(open_store(registry, host=host)).alias_get("web", "prod").version == winner

    # the raw primitive: two writers that read the same etag; only the first swap lands
    store = open_store(registry, host=host)
    etag = store.read("dataset-registry/datasets/web/aliases/prod.json").etag
    store.swap("dataset-registry/datasets/web/aliases/prod.json", b'{"x": 1}', etag)
    with pytest.raises(PreconditionFailedError):
        store.swap("dataset-registry/datasets/web/aliases/prod.json", b'{"x": 2}', etag)


def test_hostile_input_is_refused_and_nothing_is_written(tau_cli, registry, dataset_dir, tmp_path):  # type: ignore[no-untyped-def]
    cases = [
        (("../web@1.0",), "dataset name '../web'"),
        (("web@../1",), "version '../1'"),
    ]
    for args, message in cases:
        result = tau_cli("data", "dataset", "register", *args, "--registry", registry, "--purpose", "pretrain",
                         "--from", str(dataset_dir))
        assert result.exit_code == 2 and message in result.stderr, result
    sas = _register(tau_cli, registry, dataset_dir, "web@1.0", "--registry",
                    "az://acct/container/p?sv=2024&sig=abc")
    assert sas.exit_code == 2 and "credentials are not accepted" in sas.stderr and "sig=abc" not in sas.stderr
    prefix = tau_cli("data", "dataset", "list", "--registry", "az://acct/container/../../x")
    assert prefix.exit_code == 2 and "not a canonical relative path" in prefix.stderr
    http = tau_cli("data", "dataset", "register", "web@1.0", "--registry", registry, "--purpose", "pretrain",
                   "--from", "http://example.com/data")
    assert http.exit_code == 2 and "plain http://" in http.stderr
    outside = tmp_path / "secret.bin"
    outside.write_bytes(b"secret!!")
    (dataset_dir / "shards" / "leak.bin").symlink_to(outside)
    leak = _register(tau_cli, registry, dataset_dir, "web@1.0")
    assert leak.exit_code == 2 and "escapes the root" in leak.stderr
    (dataset_dir / "shards" / "leak.bin").unlink()

    manifest = tmp_path / "manifest.json"
    files = [{"path": "a.bin", "bytes": 4, "sha256": "0" * 64}]
    manifest.write_text(json.dumps({"files": files, "digest": "sha256:" + "f" * 64}))
    wrong = tau_cli("data", "dataset", "register", "web@1.0", "--registry", registry, "--purpose", "pretrain",
                    "--manifest", str(manifest))
    assert wrong.exit_code == 1 and "does not match computed" in wrong.stderr
    manifest.write_text(json.dumps({"files": files, "uri": f"file://{dataset_dir}"}))
    unverified = tau_cli("data", "dataset", "register", "web@1.0", "--registry", registry, "--purpose", "pretrain",
                         "--manifest", str(manifest), "--assurance", "verified")
    assert unverified.exit_code == 1 and "does not match the bytes" in unverified.stderr
    listed = tau_cli("data", "dataset", "list", "--registry", registry, "-o", "json")
    assert json.loads(listed.stdout) == []


def test_ref_status_and_local_ingest(tau_cli, registry, dataset_dir, tmp_path):  # type: ignore[no-untyped-def]
    dest = tmp_path / "dest"
    manifest = tmp_path / "m.json"
    assert _register(tau_cli, registry, dataset_dir, "web@1.0", "-o", "json").exit_code == 0
    files = json.loads(tau_cli("data", "dataset", "show", "web@1.0", "--registry", registry, "-o", "json").stdout)[
        "files"]
    manifest.write_text(json.dumps({"files": files, "uri": f"file://{dest}"}))
    assert tau_cli("data", "dataset", "register", "web@2.0", "--registry", registry, "--purpose", "pretrain",
                   "--manifest", str(manifest)).exit_code == 0
    missing = tau_cli("data", "dataset", "status", "web@2.0", "--registry", registry)
    assert missing.exit_code == 1 and "no ingest status found" in missing.stderr
    done = tau_cli("data", "dataset", "ingest", "web@2.0", "--registry", registry,
                   "--source-root", f"file://{dataset_dir}", "-o", "json")
    assert done.exit_code == 0, done
    assert json.loads(done.stdout)["state"] == "ready"
    assert (dest / "shards" / "000.bin").read_bytes() == (dataset_dir / "shards" / "000.bin").read_bytes()
    status = json.loads(tau_cli("data", "dataset", "status", "web@2.0", "--registry", registry, "-o", "json").stdout)
    assert status["verified_files"] == 3 and status["state"] == "ready"
    assert tau_cli("data", "dataset", "verify", "web@2.0", "--registry", registry).exit_code == 0
    env = tau_cli("data", "dataset", "ref", "web@2.0", "--registry", registry, "-o", "env", "--staged-root", "/nvme")
    assert "FINEWEB_DATASET_URIS=/nvme/README.bin,/nvme/shards/000.bin" in env.stdout
    no_root = tau_cli("data", "dataset", "ref", "web@2.0", "--registry", registry, "-o", "env")
    assert no_root.exit_code == 2 and "never mints SAS URLs" in no_root.stderr
    remote = tau_cli("data", "dataset", "ingest", "web@2.0", "--registry", registry,
                     "--source-root", "https://example.com/data?sig=x")
    assert remote.exit_code == 2 and "credentials are not accepted" in remote.stderr
