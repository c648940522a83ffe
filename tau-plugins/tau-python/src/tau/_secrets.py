"""Secrets: values that become a Kubernetes Secret plus ``secretKeyRef`` env, never manifest text."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from tau._errors import TauSDKError


@dataclass(frozen=True)
class SecretSource:
    """A secret value the SDK ships in the 0600 payload file (``literal``, ``env`` or ``file``)."""

    kind: str
    ref: str
    _value: str | None = None

    def resolve(self) -> str:
        if self.kind == "literal":
            return self._value or ""
        if self.kind == "env":
            value = os.environ.get(self.ref)
            if value is None:
                raise TauSDKError(f"tau-py: secret_from_env({self.ref!r}): the variable is not set")
            return value
        try:
            return Path(self.ref).expanduser().read_text(encoding="utf-8").rstrip("\n")
        except OSError as exc:
            raise TauSDKError(f"tau-py: secret_from_file({self.ref!r}): {exc.strerror or exc}") from None

    def __repr__(self) -> str:  # never show the value
        return f"SecretSource(kind={self.kind!r}, ref={self.ref if self.kind != 'literal' else '<redacted>'!r})"


@dataclass(frozen=True)
class SecretRef:
    """A key of an existing Kubernetes Secret (rendered as ``runtime.env_secret``)."""

    name: str
    key: str


def secret(value: str) -> SecretSource:
    """A literal secret value (kept out of manifests and redacted in dry-run)."""
    if not isinstance(value, str):
        raise TauSDKError("tau-py: tau.secret() takes a string")
    return SecretSource("literal", "<literal>", value)


def secret_from_env(name: str) -> SecretSource:
    """The value of the environment variable ``name`` at submit time."""
    return SecretSource("env", name)


def secret_from_file(path: str | os.PathLike[str]) -> SecretSource:
    """The contents of ``path`` (trailing newline removed) at submit time."""
    return SecretSource("file", str(path))


def secret_ref(name: str, key: str) -> SecretRef:
    """A reference to ``key`` of the existing Secret ``name`` in the target namespace."""
    return SecretRef(name, key)
