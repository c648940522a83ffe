"""``https://host/path``: a public, read-only source for ``ingest`` (never a registry).

Objects are fetched by key under the base URL with TLS verification (the system trust store,
or ``SSL_CERT_FILE``).  A source over https cannot be listed, so it only serves ingest, which
knows the file list from the record.  URLs carrying credentials never get here: the location
parser refuses query strings, user-info and plain ``http://`` first.
"""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
from typing import Any, BinaryIO

from tau_core.errors import ClusterError, NotFoundError, UsageError
from tau_core.storage import ObjectInfo, Versioned, check_key
from tau_core.storage.base import Progress, sha256_stream

TIMEOUT = 60


class _HttpsOnlyRedirects(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, req, fp, code, msg, headers, newurl):  # type: ignore[no-untyped-def]
        if not newurl.lower().startswith("https://"):
            raise UsageError(f"refusing a redirect from {req.full_url} to non-https {newurl.split('?')[0]}")
        return super().redirect_request(req, fp, code, msg, headers, newurl)


_OPENER = urllib.request.build_opener(_HttpsOnlyRedirects)


class HttpsSource:
    def __init__(self, url: str, location: Any = None, **_options: Any) -> None:
        self.url = url.rstrip("/")

    def _fetch(self, key: str) -> Any:
        target = f"{self.url}/{urllib.parse.quote(check_key(key))}"
        try:
            return _OPENER.open(target, timeout=TIMEOUT)
        except urllib.error.HTTPError as exc:
            if exc.code == 404:
                raise NotFoundError(f"{key} was not found at {self.url}") from None
            raise ClusterError(f"GET {target} failed: HTTP {exc.code}") from None
        except (urllib.error.URLError, OSError) as exc:
            raise ClusterError(f"GET {target} failed: {getattr(exc, 'reason', exc)}") from None

    def list(self, prefix: str = "") -> list[ObjectInfo]:
        raise UsageError(f"{self.url} cannot be listed (https:// sources serve ingest only)",
                         hint="register from a local directory or az://, or pass --manifest")

    def open(self, key: str) -> BinaryIO:
        stream: BinaryIO = self._fetch(key)
        return stream

    def read(self, key: str) -> Versioned:
        with self._fetch(key) as response:
            data = response.read()
        return Versioned(data=data, etag=response.headers.get("ETag", ""))

    def hash(self, key: str, progress: Progress | None = None) -> tuple[str, int]:
        with self._fetch(key) as response:
            return sha256_stream(response, progress)

    def _read_only(self, *_args: Any, **_kwargs: Any) -> Any:
        raise UsageError(f"{self.url} is a read-only https:// source")

    create = swap = delete = upload = _read_only
