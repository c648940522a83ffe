"""Test support for TauGrid and its plugin authors."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from tau_testing.runner import CliResult, TauCli

__all__ = ["CliResult", "TauCli"]


def __getattr__(name: str) -> Any:
    # Lazy so that ``tau_testing.sim`` (and the pytest plugin) start without importing click and tau_core.
    if name in __all__:
        from tau_testing import runner

        return getattr(runner, name)
    raise AttributeError(f"module 'tau_testing' has no attribute {name!r}")
