"""Config problems with positions, and the error that carries all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tau_core.errors import ConfigError

PathKey = str | int


def dotted(path: Sequence[PathKey]) -> str:
    """``("storage", "image_assets", 0, "name")`` -> ``storage.image_assets[0].name``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


@dataclass(frozen=True)
class ConfigIssue:
    """One problem (or warning) in a config file, with its position (1-based)."""

    file: str
    line: int
    column: int
    path: str
    message: str
    hint: str | None = None
    severity: str = "error"

    def format(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        field = f" {self.path}:" if self.path else ""
        return f"{where}:{field} {self.message}"

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ConfigValidationError(ConfigError):
    """A config file has one or more problems; ``issues`` lists every one of them."""

    def __init__(self, issues: Sequence[ConfigIssue], warnings: Sequence[ConfigIssue] = ()) -> None:
        self.issues = list(issues)
        self.warnings = list(warnings)
        first = self.issues[0]
        if len(self.issues) == 1:
            message, hint = first.format(), first.hint
        else:
            lines = [f"{first.file} has {len(self.issues)} problems:"]
            for issue in self.issues:
                lines.append("  " + issue.format() + (f" (hint: {issue.hint})" if issue.hint else ""))
            message, hint = "\n".join(lines), None
        super().__init__(message, hint=hint)
