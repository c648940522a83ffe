"""``az://<account>/<container>[/prefix]``: Azure Blob Storage through azure-storage-blob.

Authentication is the caller's Azure identity (``DefaultAzureCredential``, which includes the
Azure CLI login and workload identity), then Tau's own Entra sign-in (``tau_core.azure_auth``).
No SAS token or account key is accepted from the command line or stored; a plugin (or a test) may
hand the factory a ``credential`` object.

* ``create``: ``If-None-Match: *`` (immutability).
* ``swap``/``delete``: ``If-Match: <etag>`` (compare-and-swap), or ``If-None-Match: *`` when the
  key must be absent.
* Block-blob uploads commit on the final block list, so a killed upload leaves nothing visible.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any, BinaryIO

from tau_core.errors import ClusterError, NotFoundError
from tau_core.storage import AlreadyExistsError, ObjectInfo, PreconditionFailedError, Versioned, check_key, join_key
from tau_core.storage.base import Progress, sha256_stream

ENV_ENDPOINT = "TAU_AZURE_BLOB_ENDPOINT"  # e.g. a private-link endpoint; {account} is substituted


class _ChunkStream:
    """``read(n)`` over a downloader's chunk iterator (streaming, bounded memory)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._buf = b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self._buf) < size:
            nxt = next(self._chunks, None)
            if nxt is None:
                break
            self._buf += nxt
        if size < 0:
            out, self._buf = self._buf, b""
        else:
            out, self._buf = self._buf[:size], self._buf[size:]
        return out

    def close(self) -> None:
        self._buf = b""

    def __enter__(self) -> _ChunkStream:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()


class _ProgressStream:
    def __init__(self, stream: BinaryIO, progress: Progress | None) -> None:
        self.stream, self.progress = stream, progress

    def read(self, size: int = -1) -> bytes:
        chunk = self.stream.read(size)
        if self.progress is not None and chunk:
            self.progress(len(chunk))
        return chunk


class AzureBlobStore:
    def __init__(self, url: str, location: Any = None, credential: Any = None, account_url: str | None = None,
                 **_options: Any) -> None:
        from azure.storage.blob import BlobServiceClient

        if location is None:
            from tau_core.storage import parse_location

            location = parse_location(url)
        self.url, self.location, self.prefix = url, location, location.prefix
        endpoint = account_url or os.environ.get(ENV_ENDPOINT, "https://{account}.blob.core.windows.net")
        if credential is None:
            from azure.identity import ChainedTokenCredential, DefaultAzureCredential

            from tau_core.azure_auth import signed_in_credential

            signed_in = signed_in_credential()  # the sign-in `tau workspace connection` made, when there is one
            credential = (DefaultAzureCredential() if signed_in is None
                          else ChainedTokenCredential(DefaultAzureCredential(), signed_in))
        service = BlobServiceClient(endpoint.format(account=location.account), credential=credential)
        self.container = service.get_container_client(location.container)

    def _name(self, key: str) -> str:
        return join_key(self.prefix, check_key(key))

    def _errors(self, exc: Exception, key: str) -> Exception:
        from azure.core.exceptions import ClientAuthenticationError, ResourceNotFoundError

        if isinstance(exc, ResourceNotFoundError):
            return NotFoundError(f"{key} was not found in {self.url}")
        if isinstance(exc, ClientAuthenticationError):
            return ClusterError(f"Azure refused the credentials for {self.url}: {str(exc).splitlines()[0]}",
                                hint="run `az login`, or check the workload identity's role on the container")
        return ClusterError(f"Azure Blob request for {key} in {self.url} failed: {str(exc).splitlines()[0]}")

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        base = join_key(self.prefix, prefix.strip("/"))
        start = base + "/" if base else ""
        try:
            blobs = list(self.container.list_blobs(name_starts_with=start))
        except Exception as exc:
            raise self._errors(exc, prefix or "/") from None
        strip = len(self.prefix) + 1 if self.prefix else 0
        return sorted((ObjectInfo(key=b.name[strip:], size=b.size, etag=b.etag) for b in blobs), key=lambda i: i.key)

    def read(self, key: str) -> Versioned:
        try:
            downloader = self.container.download_blob(self._name(key))
            return Versioned(data=downloader.readall(), etag=downloader.properties.etag)
        except Exception as exc:
            raise self._errors(exc, key) from None

    def open(self, key: str) -> BinaryIO:
        try:
            downloader = self.container.download_blob(self._name(key))
        except Exception as exc:
            raise self._errors(exc, key) from None
        return _ChunkStream(downloader.chunks())  # type: ignore[return-value]

    def hash(self, key: str, progress: Progress | None = None) -> tuple[str, int]:
        with self.open(key) as stream:
            return sha256_stream(stream, progress)

    def _put(self, key: str, data: Any, *, etag: str | None, exists_error: type[Exception]) -> str:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceExistsError, ResourceModifiedError

        blob = self.container.get_blob_client(self._name(key))
        try:
            if etag is None:
                result = blob.upload_blob(data, overwrite=False, max_concurrency=2)
            else:
                result = blob.upload_blob(data, overwrite=True, etag=etag,
                                          match_condition=MatchConditions.IfNotModified, max_concurrency=2)
        except (ResourceExistsError, ResourceModifiedError):
            raise exists_error(f"{key} already exists in {self.url}" if etag is None
                               else f"{key} changed concurrently in {self.url}") from None
        except Exception as exc:
            raise self._errors(exc, key) from None
        return str(result["etag"])

    def create(self, key: str, data: bytes) -> str:
        return self._put(key, data, etag=None, exists_error=AlreadyExistsError)

    def swap(self, key: str, data: bytes, expect: str | None) -> str:
        return self._put(key, data, etag=expect, exists_error=PreconditionFailedError)

    def upload(self, key: str, stream: BinaryIO, progress: Progress | None = None) -> ObjectInfo:
        counted = _ProgressStream(stream, progress)
        etag = self._put(key, counted, etag=None, exists_error=AlreadyExistsError)
        props = self.container.get_blob_client(self._name(key)).get_blob_properties()
        return ObjectInfo(key=key, size=props.size, etag=etag)

    def delete(self, key: str, expect: str | None = None) -> None:
        from azure.core import MatchConditions
        from azure.core.exceptions import ResourceModifiedError

        try:
            if expect is None:
                self.container.delete_blob(self._name(key))
            else:
                self.container.delete_blob(self._name(key), etag=expect,
                                           match_condition=MatchConditions.IfNotModified)
        except ResourceModifiedError:
            raise PreconditionFailedError(f"{key} changed concurrently in {self.url}") from None
        except Exception as exc:
            raise self._errors(exc, key) from None
