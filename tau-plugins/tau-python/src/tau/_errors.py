"""The SDK's one error type: every message starts with ``tau-py:`` and names what to change."""

from __future__ import annotations


class TauSDKError(ValueError):
    """A documented SDK usage error (bad decorator arguments, refused submit, ...)."""

    def __init__(self, message: str) -> None:
        super().__init__(message if message.startswith("tau-py:") else f"tau-py: {message}")


class TauCLIError(RuntimeError):
    """The tau CLI (in-process or ``TAU_BINARY``) failed; ``exit_code`` is its exit code."""

    def __init__(self, message: str, exit_code: int) -> None:
        super().__init__(message)
        self.exit_code = exit_code
