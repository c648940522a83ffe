"""Object storage behind the ``tau_register_storage_backends`` hook.

One interface (:class:`ObjectStore`) for listing, reading, create-if-absent writes,
compare-and-swap and streaming hashes; one entry point (:func:`open_store`) that turns a
location such as ``file:///srv/registry``, ``az://acct/container/prefix`` or ``pvc`` into a
store through the registry.  Nothing here constructs a backend directly.
"""

from tau_core.storage.base import (
    AlreadyExistsError,
    ObjectInfo,
    ObjectStore,
    PreconditionFailedError,
    Versioned,
    check_key,
    join_key,
    sha256_stream,
)
from tau_core.storage.registry import StoreLocation, open_store, parse_location

__all__ = [
    "AlreadyExistsError",
    "ObjectInfo",
    "ObjectStore",
    "PreconditionFailedError",
    "StoreLocation",
    "Versioned",
    "check_key",
    "join_key",
    "open_store",
    "parse_location",
    "sha256_stream",
]
