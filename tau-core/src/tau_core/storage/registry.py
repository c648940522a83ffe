"""Turn a location string into a store, always through the storage-backend registry.

``file://<dir>`` -> backend ``file``; ``az://<account>/<container>[/prefix]`` -> backend ``az``;
the bare word ``pvc`` -> backend ``pvc``; any other ``<scheme>://...`` -> the backend a plugin
registered under ``<scheme>``.  Every factory is called as ``factory(url=..., **options)``.

Credentials never travel in a location: query strings (SAS tokens such as ``?sig=``/``?sv=``/
``?se=``), user-info (``user:key@``) and account keys are refused here, before any backend runs,
and so is plain ``http://``.
"""

from __future__ import annotations

import re
from typing import Any

import attrs

from tau_core.errors import UsageError
from tau_core.storage.base import ObjectStore, check_key

_SCHEME = re.compile(r"^([a-z][a-z0-9+.-]*)://(.*)$")
_SAS = re.compile(r"[?&](sig|sv|se|sp|st|spr|srt|ss|skoid)=", re.IGNORECASE)
_ACCOUNT_KEY = re.compile(r"(AccountKey|SharedAccessSignature)=", re.IGNORECASE)
_SEGMENT = re.compile(r"^[a-z0-9](?:[a-z0-9-]*[a-z0-9])?$")

REGISTRY_FORMS = "--registry must be 'pvc', 'az://<account>/<container>', or 'file://<dir>'"


@attrs.frozen
class StoreLocation:
    """A parsed location: which backend, and the parts the built-in schemes define."""

    backend: str
    url: str
    path: str = ""  # file: the directory
    account: str = ""  # az
    container: str = ""  # az
    prefix: str = ""  # az and third-party: key prefix inside the container


def refuse_credentials(url: str, *, what: str = "location") -> None:
    """Raise if ``url`` carries a credential or uses plain http."""
    if _SAS.search(url) or "?" in url:
        raise UsageError(f"{what} {redact(url)!r} carries a query string (SAS token?); credentials are not accepted",
                         hint="drop the ?... part; access uses your Azure login (DefaultAzureCredential)")
    if _ACCOUNT_KEY.search(url):
        raise UsageError(f"{what} carries an account key; account keys are not accepted",
                         hint="use your Azure login (az login / workload identity) instead")
    if url.lower().startswith("http://"):
        raise UsageError(f"{what} {url!r} uses plain http://; only https:// is accepted",
                         hint="use an https:// URL")
    match = _SCHEME.match(url)
    if match and "@" in match.group(2).split("/", 1)[0]:
        raise UsageError(f"{what} {redact(url)!r} carries user credentials; they are not accepted")


def redact(url: str) -> str:
    """``url`` without its query string or user-info (safe for messages and logs)."""
    head = url.split("?", 1)[0]
    match = _SCHEME.match(head)
    if match and "@" in match.group(2).split("/", 1)[0]:
        rest = match.group(2)
        host, _, tail = rest.partition("/")
        head = f"{match.group(1)}://***@{host.rsplit('@', 1)[1]}" + (f"/{tail}" if tail else "")
    return head + ("?<redacted>" if "?" in url else "")


def parse_location(url: str) -> StoreLocation:
    refuse_credentials(url)
    if url == "pvc":
        return StoreLocation(backend="pvc", url=url)
    match = _SCHEME.match(url)
    if not match:
        raise UsageError(f"{REGISTRY_FORMS}, got {url!r}")
    scheme, rest = match.groups()
    if scheme == "file":
        if not rest:
            raise UsageError("--registry file URL must be file://<dir>")
        return StoreLocation(backend="file", url=url, path=rest)
    if scheme == "az":
        parts = rest.split("/", 2)
        if len(parts) < 2 or not parts[0] or not parts[1]:
            raise UsageError("--registry az URL must be az://<account>/<container>", hint=f"got {url!r}")
        prefix = parts[2].strip("/") if len(parts) == 3 else ""
        if prefix:
            check_key(prefix, what="az:// prefix")
        for label, value in (("account", parts[0]), ("container", parts[1])):
            if not _SEGMENT.match(value):
                raise UsageError(f"az:// {label} {value!r} must be lowercase letters, digits and inner hyphens")
        return StoreLocation(backend="az", url=url, account=parts[0], container=parts[1], prefix=prefix)
    if scheme == "https":
        return StoreLocation(backend="https", url=url, prefix=rest.split("/", 1)[1] if "/" in rest else "")
    prefix = rest.strip("/")
    if prefix:
        check_key(prefix, what=f"{scheme}:// location")
    return StoreLocation(backend=scheme, url=url, prefix=prefix)


def open_store(url: str, host: Any = None, **options: Any) -> ObjectStore:
    """The store behind ``url``, built by the backend registered under its scheme."""
    location = parse_location(url)
    if host is None:
        from tau_core.plugins import get_host

        host = get_host()
    registry = host.registry("storage_backends")
    if location.backend not in registry:
        known = ", ".join(n for n in registry if n != "experiment-store") or "none"
        raise UsageError(f"no storage backend is registered for {location.backend!r} ({url})",
                         hint=f"installed backends: {known}; install the plugin that provides it")
    factory = registry[location.backend].load()
    store: ObjectStore = factory(url=url, location=location, **options)
    return store
