"""Test support for TauGrid and its plugin authors."""

from tau_testing.runner import CliResult, TauCli

__all__ = ["CliResult", "TauCli"]
