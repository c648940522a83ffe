"""Exact Kubernetes quantities for quota arithmetic (``Decimal``, never float) and their display form."""

from __future__ import annotations

import re
from decimal import Decimal

_QUANTITY = re.compile(r"^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(Ki|Mi|Gi|Ti|Pi|Ei|[mkMGTPE]|[eE][-+]?[0-9]+)?$")
_SCALE = {"": Decimal(1), "m": Decimal("0.001"), "k": Decimal(10) ** 3, "M": Decimal(10) ** 6,
          "G": Decimal(10) ** 9, "T": Decimal(10) ** 12, "P": Decimal(10) ** 15, "E": Decimal(10) ** 18,
          "Ki": Decimal(2) ** 10, "Mi": Decimal(2) ** 20, "Gi": Decimal(2) ** 30, "Ti": Decimal(2) ** 40,
          "Pi": Decimal(2) ** 50, "Ei": Decimal(2) ** 60}
_BINARY = ("memory", "storage", "ephemeral-storage")


def parse(value: object) -> Decimal | None:
    """``"500m"`` -> 0.5, ``"1Gi"`` -> 1073741824; None when ``value`` is not a quantity."""
    if value is None:
        return None
    match = _QUANTITY.match(str(value).strip())
    if not match:
        return None
    number, suffix = Decimal(match.group(1)), match.group(2) or ""
    if suffix[:1] in ("e", "E"):
        return number * (Decimal(10) ** int(suffix[1:]))
    return number * _SCALE[suffix]


def show(resource: str, amount: Decimal | None) -> str:
    """The display form: binary SI for memory and storage, plain (or milli) numbers otherwise."""
    if amount is None:
        return "-"
    if resource in _BINARY and amount != 0:
        for suffix in ("Ei", "Pi", "Ti", "Gi", "Mi", "Ki"):
            scale = _SCALE[suffix]
            if amount % scale == 0:
                return f"{int(amount / scale)}{suffix}"
        return str(int(amount))
    if amount == amount.to_integral_value():
        return str(int(amount))
    return f"{int(amount * 1000)}m"
