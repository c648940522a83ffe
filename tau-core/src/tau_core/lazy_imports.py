"""Start-up costs of the Kubernetes client that a CLI command does not need to pay.

* :func:`import_aiohttp_connector` imports ``aiohttp.connector`` without letting it read the system CA
  bundle.  At import, aiohttp builds two default SSL contexts (verified and unverified) and loads the
  system trust store into both (about 30 ms of CPU each here).  The Kubernetes client never uses
  them: ``kubernetes_asyncio`` hands aiohttp a context of its own, holding the CA the kubeconfig
  brings (or the system store when it brings none).  The loading is deferred, not dropped: the first
  connection that asks aiohttp for one of its default contexts completes both, so any other aiohttp
  user in the process sees exactly the contexts aiohttp would have built.
* :func:`register_lazy` registers a module whose code runs on first attribute access
  (:class:`importlib.util.LazyLoader`).  ``kubernetes_asyncio``'s configuration module imports
  ``urllib3`` (about 50 ms) for a helper Tau never calls, its API client ``dateutil.parser`` and
  ``multiprocessing.pool`` for model deserialization and synchronous calls Tau never makes.  A lazy
  module behaves as the real one for every later user.  (``pickle`` stays: aiohttp's cookie jar
  subclasses its unpickler at import.)
* :func:`without_trust_store` builds a client whose SSL context reads the system trust store only if a
  connection uses it: never, for a plain ``http://`` API server.
"""

from __future__ import annotations

import importlib.util
import ssl
import sys
import threading
import types
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_lock = threading.RLock()
_pending: list[ssl.SSLContext] = []
T = TypeVar("T")


class _Deferred(types.ModuleType):
    """Stands in ``sys.modules`` for a module not executed yet; the first unknown attribute executes it."""

    def __getattr__(self, attr: str) -> Any:
        if attr == "__path__":  # asked by every ``from x import y``; only packages have one (set below)
            raise AttributeError(attr)
        return getattr(_execute(self.__name__), attr)


def _execute(name: str) -> types.ModuleType:
    with _lock:
        current = sys.modules.get(name)
        if isinstance(current, _Deferred):
            del sys.modules[name]
        else:
            current = None
    module = importlib.import_module(name)
    if current is not None:
        current.__dict__.update(module.__dict__)  # so later attribute reads skip __getattr__
    return module


def register_lazy(name: str, *, forward: tuple[str, ...] = ()) -> None:
    """Register module ``name`` so that it is executed only when first used.

    ``import name`` then binds a stand-in; its first unknown attribute executes the real module
    (and replaces the stand-in in ``sys.modules``).  ``forward`` names functions that
    ``from name import f`` may bind before first use: they call the real function when called.
    A submodule's parent package is imported now, and holds the stand-in as its attribute until
    the real module replaces it.  (:class:`importlib.util.LazyLoader` does not serve here: the
    import statement itself reads the module's ``__spec__``, which executes a lazy module at once.)
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)  # imports the parent package of a submodule
    if spec is None:
        return
    module = _Deferred(name)
    module.__spec__ = spec
    module.__file__ = spec.origin
    if spec.submodule_search_locations is not None:
        module.__path__ = list(spec.submodule_search_locations)
    for attr in forward:
        module.__dict__[attr] = _forwarder(name, attr)
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)  # importing the real one rebinds it


def _forwarder(name: str, attr: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        function: Callable[..., Any] = getattr(sys.modules.get(name) or _execute(name), attr)
        if function is call:
            function = getattr(_execute(name), attr)
        return function(*args, **kwargs)

    call.__name__ = call.__qualname__ = attr
    return call


def _complete_default_contexts(chosen: object = None) -> None:
    """Load the system trust store into the deferred contexts, once ``chosen`` is one of them (or always)."""
    with _lock:
        if chosen is not None and not any(chosen is context for context in _pending):
            return
        while _pending:
            _pending.pop().set_default_verify_paths()


@contextmanager
def _deferring_verify_paths() -> Iterator[None]:
    """Within: ``set_default_verify_paths`` on this thread records its context as pending instead of reading
    the system trust store (other threads are unaffected)."""
    with _lock:
        caller = threading.get_ident()
        inherited = ssl.SSLContext.set_default_verify_paths
        own = ssl.SSLContext.__dict__.get("set_default_verify_paths")  # None in CPython: a C method

        def record(self: ssl.SSLContext) -> None:
            if threading.get_ident() == caller:
                _pending.append(self)
            else:
                inherited(self)

        ssl.SSLContext.set_default_verify_paths = record  # type: ignore[method-assign]
        try:
            yield
        finally:
            if own is None:
                del ssl.SSLContext.set_default_verify_paths  # the inherited C method again
            else:
                ssl.SSLContext.set_default_verify_paths = own  # type: ignore[method-assign]


def _complete_on_first_use(connector: Any) -> bool:
    """Make aiohttp complete a pending context when a connection is about to use it (once per process)."""
    tcp = getattr(connector, "TCPConnector", None)
    original: Callable[..., Any] | None = getattr(tcp, "_get_ssl_context", None)
    if tcp is None or original is None:  # an aiohttp without that seam
        return False
    if getattr(original, "_tau_completes_pending", False):
        return True

    def _get_ssl_context(self: Any, req: Any) -> Any:
        chosen = original(self, req)
        if _pending and chosen is not None:  # None: a plain-HTTP connection, no TLS at all
            _complete_default_contexts(chosen)  # only when the connection picked a pending context
        return chosen

    _get_ssl_context._tau_completes_pending = True  # type: ignore[attr-defined]
    tcp._get_ssl_context = _get_ssl_context
    return True


def import_aiohttp_connector() -> None:
    """Import ``aiohttp.connector`` with its default contexts' CA loading deferred to first use."""
    with _lock:
        if "aiohttp.connector" in sys.modules:
            return
        with _deferring_verify_paths():
            import aiohttp.connector as connector
    if not _complete_on_first_use(connector):  # load now, as aiohttp would have
        _complete_default_contexts()


def without_trust_store(build: Callable[[], T]) -> T:
    """``build()``, with the system trust store of the SSL contexts it creates loaded on their first use.

    ``kubernetes_asyncio`` builds an SSL context for every client, and reads the system trust store into it
    when the kubeconfig brings no CA of its own (tens of milliseconds of CPU), even for a plain ``http://``
    API server that never uses it.  A context a connection does choose is completed before the handshake.
    """
    import aiohttp.connector as connector

    if not _complete_on_first_use(connector):
        return build()
    with _deferring_verify_paths():
        return build()
