"""The typed run config at the edges: normalized mapping <-> :class:`RunConfig` (cattrs, built lazily).

The classes are generated from the field catalog (:mod:`tau_core.config.modelgen`); this module
holds the converter.  Extra keys are refused, so a normalized config that the catalog does not
describe fails loudly instead of being dropped.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from typing import TYPE_CHECKING, Any

from tau_core.config._run_config_model import RunConfig

if TYPE_CHECKING:
    import cattrs

__all__ = ["RunConfig", "converter", "normalized", "run_config"]


@cache
def converter() -> cattrs.Converter:
    """The run-config converter, built on first use (cattrs stays out of ``tau --help``)."""
    import cattrs

    conv = cattrs.Converter(forbid_extra_keys=True)
    conv.register_structure_hook(Any, lambda v, _: v)
    return conv


def run_config(values: Mapping[str, Any]) -> RunConfig:
    """The typed view of a normalized config (``ValidatedConfig.normalized``); a key the catalog does not
    describe, or a value of the wrong shape, is a :class:`~tau_core.errors.ConfigError` naming it."""
    import cattrs

    try:
        return converter().structure(dict(values), RunConfig)
    except cattrs.BaseValidationError as exc:
        from tau_core.errors import ConfigError

        detail = "; ".join(cattrs.transform_error(exc, path="config"))
        raise ConfigError(f"the normalized run config does not match the field catalog: {detail}",
                          hint="regenerate the model with python -m tau_core.config.modelgen") from None


def normalized(config: RunConfig) -> dict[str, Any]:
    """The normalized mapping of a typed config (every catalog path present, ``None`` when unset)."""
    data: dict[str, Any] = converter().unstructure(config)
    return data
