"""The listen addresses of ``--health-probe-bind-address`` and ``--metrics-bind-address``.

Kept free of heavy imports so that ``tau-controller run`` refuses a malformed address at once, before kopf
and aiohttp load.
"""

from __future__ import annotations

from tau_core.errors import UsageError

LOOPBACK = "127.0.0.1"


def bind_address(text: str, flag: str) -> tuple[str, int] | None:
    """``host:port``, ``:port`` (every interface, as the chart passes it) or ``0``/``off`` (disabled)."""
    value = text.strip()
    if value in ("0", "off", ""):
        return None
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"{flag} {text!r} is not host:port or :port", hint=f"for example {flag} 127.0.0.1:8081")
    return host.strip("[]") or "0.0.0.0", int(port)
