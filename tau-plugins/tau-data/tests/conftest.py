"""Fixtures: Azurite from npm on a loopback port, and one registry per backend.

Azurite's well-known development account key is used only here, by the inline plugin that hands
the ``az`` backend a credential object; the CLI itself never accepts a key.
"""

from __future__ import annotations

import hashlib
import io
import os
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tau_core.errors import NotFoundError
from tau_core.hookspecs import hookimpl
from tau_core.storage import AlreadyExistsError, ObjectInfo, PreconditionFailedError, Versioned, check_key
from tau_core.storage.base import sha256_stream
from tau_testing.azurite import DEV_ACCOUNT, DEV_KEY, azurite_launcher, start_azurite

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="session")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The blob endpoint of a running Azurite (fails, never skips, when it cannot be started)."""
    try:
        server = start_azurite(azurite_launcher(REPO), tmp_path_factory.mktemp("azurite"))
    except (subprocess.CalledProcessError, OSError, IndexError) as exc:
        pytest.fail(f"cannot install Azurite from npm: {exc}", pytrace=False)
    except RuntimeError as exc:
        pytest.fail(str(exc), pytrace=False)
    yield server.blob_url
    server.stop()


class AzuriteStorePlugin:
    """Test-only plugin: the real ``az`` backend pointed at Azurite with the emulator's credential."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint

    @hookimpl
    def tau_register_storage_backends(self, register):  # type: ignore[no-untyped-def]
        endpoint = self.endpoint

        def factory(url, location=None, **options):  # type: ignore[no-untyped-def]
            from azure.core.credentials import AzureNamedKeyCredential

            from tau_data.azure import AzureBlobStore

            return AzureBlobStore(url, location, credential=AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY),
                                  account_url=endpoint, **options)

        register("az", factory, priority=10)


def make_container(endpoint: str) -> str:
    from azure.core.credentials import AzureNamedKeyCredential
    from azure.storage.blob import BlobServiceClient

    name = "c" + uuid.uuid4().hex[:12]
    BlobServiceClient(endpoint, credential=AzureNamedKeyCredential(DEV_ACCOUNT, DEV_KEY)).create_container(name)
    return name


# -- a third-party backend, as a platform team would ship it --------------------------------------------------
_MEM: dict[str, dict[str, bytes]] = {}
_MEM_LOCK = threading.Lock()


class MemoryStore:
    """``mem://<bucket>``: an in-process object store with content etags (the inline plugin's backend)."""

    def __init__(self, url: str, location=None, **_options) -> None:  # type: ignore[no-untyped-def]
        self.url = url
        self.objects = _MEM.setdefault(url.removeprefix("mem://").split("/")[0], {})

    @staticmethod
    def _etag(data: bytes) -> str:
        return hashlib.md5(data).hexdigest()

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        start = prefix.strip("/") + "/" if prefix.strip("/") else ""
        return [ObjectInfo(k, len(v), self._etag(v)) for k, v in sorted(self.objects.items()) if k.startswith(start)]

    def read(self, key: str) -> Versioned:
        if check_key(key) not in self.objects:
            raise NotFoundError(f"{key} was not found in {self.url}")
        return Versioned(self.objects[key], self._etag(self.objects[key]))

    def open(self, key: str):  # type: ignore[no-untyped-def]
        return io.BytesIO(self.read(key).data)

    def hash(self, key, progress=None):  # type: ignore[no-untyped-def]
        return sha256_stream(self.open(key), progress)

    def create(self, key: str, data: bytes) -> str:
        with _MEM_LOCK:
            if check_key(key) in self.objects:
                raise AlreadyExistsError(f"{key} already exists")
            self.objects[key] = data
        return self._etag(data)

    def swap(self, key: str, data: bytes, expect: str | None) -> str:
        with _MEM_LOCK:
            current = self.objects.get(check_key(key))
            if (None if current is None else self._etag(current)) != expect:
                raise PreconditionFailedError(f"{key} changed concurrently")
            self.objects[key] = data
        return self._etag(data)

    def delete(self, key: str, expect: str | None = None) -> None:
        with _MEM_LOCK:
            if check_key(key) not in self.objects:
                raise NotFoundError(f"{key} was not found")
            if expect is not None and self._etag(self.objects[key]) != expect:
                raise PreconditionFailedError(f"{key} changed concurrently")
            del self.objects[key]

    def upload(self, key, stream, progress=None):  # type: ignore[no-untyped-def]
        data = stream.read()
        self.create(key, data)
        return ObjectInfo(key, len(data))


class MemoryPlugin:
    @hookimpl
    def tau_register_storage_backends(self, register):  # type: ignore[no-untyped-def]
        register("mem", MemoryStore)


class VolumeShell:
    """Runs the registry helper pod's own shell script, with the PVC mount mapped onto the scenario's volume.

    The simulator does not execute containers; this PodScript log source does, once per pod, with the host's
    ``sh``/coreutils/``flock`` standing in for busybox, so ``ln``/``mv``/``flock`` on the volume are real.
    """

    def __init__(self, volume: Path) -> None:
        self.volume = volume
        self.done: dict[str, list[str]] = {}
        self.lock = threading.Lock()

    def __call__(self, pod, container):  # type: ignore[no-untyped-def]
        uid = pod["metadata"].get("uid") or pod["metadata"]["name"]
        with self.lock:
            if uid in self.done:
                return self.done[uid]
        spec = pod["spec"]["containers"][0]
        env = {e["name"]: e.get("value", "") for e in spec.get("env", [])}
        mount = pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"]
        env["TAU_PVC_ROOT"] = str(self.volume) + env["TAU_PVC_ROOT"][len(mount):]
        out = subprocess.run(spec["command"], env={"PATH": os.environ["PATH"], **env}, capture_output=True,
                             text=True, timeout=60)
        lines = out.stdout.splitlines()
        with self.lock:
            return self.done.setdefault(uid, lines)


@pytest.fixture(params=["file", "az", "mem", "pvc"])
def registry(request: pytest.FixtureRequest, tau_plugins, tmp_path: Path) -> str:  # type: ignore[no-untyped-def]
    """A fresh registry location on each backend; the inline plugins are registered on ``tau_plugins``."""
    if request.param == "file":
        return f"file://{tmp_path / 'registry'}"
    if request.param == "mem":
        tau_plugins.register(MemoryPlugin(), name="third-party-mem")
        return f"mem://{uuid.uuid4().hex[:10]}"
    if request.param == "pvc":
        request.getfixturevalue("pvc_grid")
        return "pvc"
    endpoint = request.getfixturevalue("azurite")
    tau_plugins.register(AzuriteStorePlugin(endpoint), name="azurite-credential")
    return f"az://{DEV_ACCOUNT}/{make_container(endpoint)}/registry"


@pytest.fixture
def dataset_dir(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    (src / "shards").mkdir(parents=True)
    (src / "shards" / "000.bin").write_bytes(os.urandom(4096))
    (src / "shards" / "001.bin").write_bytes(os.urandom(2048))
    (src / "README.bin").write_bytes(b"ab" * 10)
    return src


@pytest.fixture
def pvc_grid(taugrid_cluster):  # type: ignore[no-untyped-def]
    """The simulated TauGrid cluster with the registry helper pods' script executed on its volume."""
    from tau_core.storage.pvchelper import APP
    from tau_testing.sim.scripts import PodScript, scripts_of

    scripts_of(taugrid_cluster.cluster).add({"app": APP}, PodScript(run_seconds=0,
                                                                    logs=VolumeShell(taugrid_cluster.volume)))
    return taugrid_cluster


@pytest.fixture
def az_registry(tau_plugins, azurite) -> str:  # type: ignore[no-untyped-def]
    """A fresh Azurite container as an ``az://`` registry (the credential comes from the inline plugin)."""
    tau_plugins.register(AzuriteStorePlugin(azurite), name="azurite-credential")
    return f"az://{DEV_ACCOUNT}/{make_container(azurite)}"


@pytest.fixture
def azurite_account() -> tuple[str, str]:
    """The emulator's well-known development account and key (test fixtures only; the CLI never takes a key)."""
    return DEV_ACCOUNT, DEV_KEY
