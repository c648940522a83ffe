"""Small renderer-independent helpers: dotted config lookup, label values, image references,
flags, experiment identity, quantities and plain copies."""

from __future__ import annotations

import base64
import re
import shlex
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from tau_core.errors import ConfigError
from tau_core.hashing import canonical_json as canonical_json
from tau_core.hashing import config_hash as config_hash
from tau_core.hashing import derived_id as derived_id
from tau_core.hashing import sha256_hex as sha256_hex

if TYPE_CHECKING:
    from tau_core.config.run_model import RunConfig

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DIGEST = re.compile(r"@sha256:[0-9a-f]{64}$")
_PINNED = re.compile(
    r"^[a-z0-9]+([._-]+[a-z0-9]+)*(:[0-9]+)?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(:[\w][\w.-]{0,127})?"
    r"@sha256:[0-9a-f]{64}$"
)

_PATHS: dict[str, tuple[str, ...]] = {}


def get(config: Mapping[str, Any], dotted: str, default: Any = None) -> Any:
    """``get(cfg, "storage.output")``: a nested value, or ``default`` when missing or None."""
    parts = _PATHS.get(dotted)
    if parts is None:
        parts = _PATHS[dotted] = tuple(dotted.split("."))
    node: Any = config
    for part in parts:
        try:
            node = node.get(part)
        except AttributeError:  # a scalar or a list where a mapping was expected
            return default
        if node is None:
            return default
    return node



def is_placeholder(value: Any) -> bool:
    return isinstance(value, str) and value.startswith("<unresolved-")


def label_value(value: str) -> str:
    """Sanitize ``value`` into a Kubernetes label value (<= 63 chars, a hash suffix when cut)."""
    text = re.sub(r"[^A-Za-z0-9._-]+", "-", value.strip().lower())
    text = re.sub(r"-{2,}", "-", text).strip("-_.")
    if len(text) > 63:
        text = text[: 63 - 9].rstrip("-_.") + "-" + sha256_hex(value)[:8]
    if not _LABEL_VALUE.match(text):
        text = "x-" + sha256_hex(value)[:8]
    return text


def image_digest(image: str) -> str | None:
    match = _DIGEST.search(image)
    return match.group(0)[1:] if match else None


def is_pinned_image(image: str) -> bool:
    """A complete lowercase OCI reference pinned by ``@sha256:<64 lowercase hex>``."""
    return bool(_PINNED.match(image))


def require_pinned(image: str, field_name: str) -> None:
    if not is_pinned_image(image):
        raise ConfigError(
            f"{field_name} must be a complete lowercase OCI image reference pinned by an @sha256:<64 lowercase hex> digest",  # noqa: E501
            hint="resolve the tag to its digest (for example with `docker buildx imagetools inspect`) and use IMAGE@sha256:...",  # noqa: E501
        )


def shell_join(argv: Sequence[str]) -> str:
    return " ".join(shlex.quote(a) for a in argv)


def config_flags(configs: Mapping[str, Any] | None) -> list[str]:
    """``execution.configs`` as sorted ``--key=value`` script flags (python and torchrun launchers)."""
    flags: list[str] = []
    for key in sorted(configs or {}):
        value = (configs or {})[key]
        if isinstance(value, bool):
            text = "true" if value else "false"
        elif value is None:
            text = ""
        else:
            text = str(value)
        flags.append(f"--{key}={text}" if text != "" else f"--{key}")
    return flags


# -- experiment identity -------------------------------------------------------------------------


def experiment_identity(config: RunConfig) -> tuple[str, str, str]:
    """(project, experiment id, group); the id is ``name`` -> id from ``title`` -> ``group``."""
    experiment = config.experiment
    project = str(experiment.project or "")
    group = str(experiment.group or "")
    name = str(experiment.name or "")
    if not name:
        title = str(experiment.title or "")
        if title:
            name = re.sub(r"[^a-z0-9._-]+", "-", title.strip().lower()).strip("-")
    return project, name or group, group



_QUANTITY = re.compile(r"^([+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))([eE][-+]?[0-9]+|[mkMGTPE]|[KMGTPE]i)?$")
_SUFFIX = {"": 1.0, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40, "Pi": 2.0**50, "Ei": 2.0**60}


def quantity_value(value: Any) -> float | None:
    """A Kubernetes resource quantity as a number (``"500m"`` -> 0.5, ``"1Gi"`` -> 1073741824.0)."""
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    number, suffix = float(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E") and suffix not in _SUFFIX:
        return float(number * 10 ** int(suffix[1:]))
    return number * _SUFFIX[suffix]


def check_request_within_limit(what: str, request: Any, limit: Any) -> None:
    """A request above its limit is rejected by the API server; say so before submitting."""
    req, lim = quantity_value(request), quantity_value(limit)
    if req is not None and lim is not None and req > lim:
        raise ConfigError(f"{what} request {request} is above its limit {limit}",
                          hint="raise the limit or lower the request")


def detached(objects: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Independent plain copies (no shared sub-objects, so YAML has no anchors and edits stay local)."""
    return [_plain_copy(obj) for obj in objects]


def _plain_copy(value: Any) -> Any:
    kind = type(value)
    if kind is str or kind is int or kind is bool:
        return value
    if kind is dict or isinstance(value, Mapping):
        return {str(k): _plain_copy(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain_copy(v) for v in value]
    return value


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
