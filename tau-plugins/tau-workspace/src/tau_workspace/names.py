"""Name checks shared by the operator verbs: DNS-1123 labels, label values, absolute paths, UUID shape.

Every check raises a one-line :class:`~tau_core.errors.UsageError` naming the flag and the offending
value (clipped, so a hostile value can neither flood nor control the terminal).
"""

from __future__ import annotations

import posixpath
import re

from tau_core.errors import UsageError
from tau_core.output import clip

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def shown(value: str) -> str:
    """``value`` quoted and clipped for an error message."""
    return '"' + clip(value, 80) + '"'


def dns_label(value: str, flag: str) -> str:
    """``value`` when it is a DNS-1123 label (lowercase alphanumerics and '-', at most 63 characters)."""
    if not value or len(value) > 63 or not _DNS1123_LABEL.match(value):
        raise UsageError(
            f"{flag} {shown(value)} is not a valid DNS-1123 label",
            hint="use at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit")
    return value


def label_value(value: str, flag: str) -> str:
    """``value`` when Kubernetes accepts it as a label value."""
    if len(value) > 63 or not _LABEL_VALUE.match(value):
        raise UsageError(f"{flag} {shown(value)} is not a valid Kubernetes label value",
                         hint="use at most 63 letters, digits, '-', '_' or '.', starting and ending alphanumeric")
    return value


def plain_text(value: str, flag: str) -> str:
    """A free-text identifier (a group or user name): not blank, no control characters, bounded."""
    if not value.strip():
        raise UsageError(f"{flag} must not be blank")
    if _CONTROL.search(value) or len(value) > 253:
        raise UsageError(f"{flag} {shown(value)} contains control characters or is longer than 253 characters",
                         hint="pass the group, user or service account name exactly as the identity provider "
                              "asserts it")
    return value


def is_uuid(value: str) -> bool:
    return bool(_UUID.match(value))


def absolute_clean_path(value: str, flag: str) -> str:
    """``value`` when it is an absolute POSIX path already in clean form (no '..', '//', trailing '/')."""
    if _CONTROL.search(value) or not value.startswith("/") or posixpath.normpath(value) != value:
        raise UsageError(f"{flag} {shown(value)} must be an absolute, clean path",
                         hint="for example /data/projects/aurora/runs")
    return value
