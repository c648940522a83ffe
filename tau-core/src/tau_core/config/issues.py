"""Config problems with positions, and the error that carries all of them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from tau_core.errors import ConfigError

PathKey = str | int
#: Echoed input is clipped: a 900,000-character key must not make a 1.8 MB error message.
MAX_PATH_CHARS = 200
MAX_MESSAGE_CHARS = 600
MAX_LISTED_ISSUES = 50


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} characters)"


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

    def __post_init__(self) -> None:
        object.__setattr__(self, "file", _clip(self.file, MAX_PATH_CHARS))
        object.__setattr__(self, "path", _clip(self.path, MAX_PATH_CHARS))
        object.__setattr__(self, "message", _clip(self.message, MAX_MESSAGE_CHARS))
        if self.hint is not None:
            object.__setattr__(self, "hint", _clip(self.hint, MAX_MESSAGE_CHARS))

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
            for issue in self.issues[:MAX_LISTED_ISSUES]:
                lines.append("  " + issue.format() + (f" (hint: {issue.hint})" if issue.hint else ""))
            if len(self.issues) > MAX_LISTED_ISSUES:
                lines.append(f"  ... and {len(self.issues) - MAX_LISTED_ISSUES} more")
            message, hint = "\n".join(lines), None
        super().__init__(message, hint=hint)
