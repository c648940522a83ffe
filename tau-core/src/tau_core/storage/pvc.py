"""``pvc``: the workspace's ``blob-training`` volume, read and written through helper pods.

Each operation is one short-lived pod (:mod:`tau_core.storage.pvchelper`) in the workspace
namespace, always deleted afterwards.  The namespace is ``-n``, else the connected workspace's
(resolved by the ``kubernetes`` execution backend, reached through its registry).
"""

from __future__ import annotations

import asyncio
import base64
import io
import time
from typing import Any, BinaryIO

from tau_core.errors import NotFoundError, TauError, UsageError
from tau_core.storage import pvchelper as h
from tau_core.storage.base import (
    AlreadyExistsError,
    ObjectInfo,
    PreconditionFailedError,
    Progress,
    Versioned,
    check_key,
)

RESULT_PVC = "blob-training"
MOUNT = "/data"
TIMEOUT = 90.0


class PvcStore:
    def __init__(self, url: str = "pvc", location: Any = None, namespace: str | None = None,
                 context: str | None = None, kubeconfig: str | None = None, pvc: str = RESULT_PVC,
                 host: Any = None, **_options: Any) -> None:
        if host is None:
            from tau_core.plugins import get_host

            host = get_host()
        factory = host.registry("execution_backends")["kubernetes"].load()
        self.kube = factory(kubeconfig=kubeconfig, context=context)
        self.url, self.pvc, self._namespace = url, pvc, namespace

    @property
    def namespace(self) -> str:
        if not self._namespace:
            from tau_core.lifecycle.base import RunRef

            self._namespace = self.kube.resolve_namespace(RunRef("registry")).namespace
        return self._namespace

    def _call(self, op: str, key: str, payload: bytes = b"", expect: str | None = None) -> list[str]:
        if len(payload) > h.MAX_PAYLOAD:
            raise UsageError(f"{key} is {len(payload)} bytes; the pvc backend writes records of at most "
                             f"{h.MAX_PAYLOAD} bytes", hint="copy dataset bytes with `ingest --workspace` instead")
        ns = self.namespace
        pod = h.helper_pod(ns, self.pvc, MOUNT, MOUNT, op, key, payload=payload, expect=expect)
        text: str = self.kube._run(self._pod, ns, pod)
        lines = text.splitlines()
        if any(line.startswith(h.REFUSED) for line in lines):
            raise UsageError(f"refusing {op} of {key or '/'} on PVC {self.pvc}: a symbolic link or a path outside "
                             "the registry root", hint="remove the symlink on the volume")
        return lines

    async def _pod(self, session: Any, ns: str, pod: dict[str, Any]) -> str:
        from tau_core.kube import api_path

        name = pod["metadata"]["name"]
        path = api_path("v1", "pods", namespace=ns, name=name)
        created = await session.create(api_path("v1", "pods", namespace=ns), pod)
        try:
            deadline, phase, pause = time.monotonic() + TIMEOUT, "", 0.02
            while time.monotonic() < deadline:
                current = await session.get(path, missing_ok=True)
                phase = ((current or {}).get("status") or {}).get("phase", "")
                if phase in ("Succeeded", "Failed") or current is None:
                    break
                await asyncio.sleep(pause)
                pause = min(pause * 1.5, 0.5)
            if phase != "Succeeded":
                raise TauError(f"the registry helper pod {ns}/{name} did not succeed (phase {phase or '?'})",
                               hint=f"check that PVC {self.pvc} exists and can be mounted in namespace {ns}")
            text: str = await session.text(path + "/log", query={"container": "registry"})
        finally:
            await session.delete(path, propagation="Background", uid=(created.get("metadata") or {}).get("uid"))
        return text

    @staticmethod
    def _status(lines: list[str]) -> tuple[str, list[str]]:
        for line in lines:
            if line.startswith("TAU_PVC_") and not line.startswith(("TAU_PVC_BEGIN", "TAU_PVC_END")):
                word, *rest = line.split()
                return word, rest
        raise TauError("the registry helper pod returned no result", hint="retry; check the pod's image and PVC")

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        prefix = prefix.strip("/")
        lines = self._call("list", check_key(prefix, allow_empty=True))
        if h.COMPLETE not in lines:
            raise TauError("the registry helper pod returned an incomplete listing", hint="retry the command")
        links = [base64.b64decode(line.split(" ", 1)[1]).decode() for line in lines if line.startswith("L ")]
        if links:
            raise UsageError(f"refusing to list {prefix or '/'} on PVC {self.pvc}: {links[0]} is a symbolic link",
                             hint="registry volumes hold plain files; remove the symlink")
        found = []
        for line in lines:
            if line.startswith("F "):
                _, size, encoded = line.split(" ", 2)
                found.append(ObjectInfo(key=base64.b64decode(encoded).decode(), size=int(size)))
        return sorted(found, key=lambda i: i.key)

    def read(self, key: str) -> Versioned:
        lines = self._call("read", check_key(key))
        word, rest = self._status(lines)
        if word == h.MISSING:
            raise NotFoundError(f"{key} was not found on PVC {self.pvc} ({self.namespace})")
        try:
            begin, end = lines.index("TAU_PVC_BEGIN"), lines.index("TAU_PVC_END")
        except ValueError:
            raise TauError(f"the registry helper pod returned an incomplete {key}", hint="retry") from None
        return Versioned(data=base64.b64decode("".join(lines[begin + 1:end])), etag=rest[0])

    def open(self, key: str) -> BinaryIO:
        return io.BytesIO(self.read(key).data)

    def hash(self, key: str, progress: Progress | None = None) -> tuple[str, int]:
        word, rest = self._status(self._call("hash", check_key(key)))
        if word == h.MISSING:
            raise NotFoundError(f"{key} was not found on PVC {self.pvc}")
        if progress is not None:
            progress(int(rest[1]))
        return rest[0], int(rest[1])

    def _write(self, op: str, key: str, data: bytes, expect: str | None) -> str:
        word, rest = self._status(self._call(op, check_key(key), data, expect))
        if word == h.OK:
            return rest[0] if rest else ""
        if word == h.EXISTS:
            raise AlreadyExistsError(f"{key} already exists on PVC {self.pvc}")
        if word == h.MISSING:
            raise NotFoundError(f"{key} was not found on PVC {self.pvc}")
        raise PreconditionFailedError(f"{key} changed concurrently on PVC {self.pvc}")

    def create(self, key: str, data: bytes) -> str:
        return self._write("create", key, data, None)

    def swap(self, key: str, data: bytes, expect: str | None) -> str:
        return self._write("swap", key, data, expect)

    def delete(self, key: str, expect: str | None = None) -> None:
        self._write("delete", key, b"", expect)

    def upload(self, key: str, stream: BinaryIO, progress: Progress | None = None) -> ObjectInfo:
        data = stream.read(h.MAX_PAYLOAD + 1)
        self.create(key, data)
        if progress is not None:
            progress(len(data))
        return ObjectInfo(key=key, size=len(data))
