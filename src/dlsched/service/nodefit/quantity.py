"""Kubernetes resource quantities ("500m", "1.5Gi", "2e3", "8"), parsed exactly.

kube-scheduler compares CPU in millicores and everything else in whole units, each rounded *up*
(``Quantity.MilliValue()`` / ``Quantity.Value()``); a float would misjudge "0.1" + "0.2" against
"300m", so the parse is a :class:`fractions.Fraction`. The grammar is the API's:
``[+-] digits [. digits] [suffix]`` with a binary suffix (Ki Mi Gi Ti Pi Ei), a decimal one
(n u m "" k M G T P E) or a decimal exponent (``e3``, ``E-2``).
"""

from __future__ import annotations

import math
import re
from fractions import Fraction
from functools import lru_cache

_BINARY = {"Ki": 1, "Mi": 2, "Gi": 3, "Ti": 4, "Pi": 5, "Ei": 6}
_DECIMAL = {"n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18}
_QUANTITY = re.compile(r"([+-]?)([0-9]+(?:\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+|Ki|Mi|Gi|Ti|Pi|Ei|[numkMGTPE]?)")
MAX_TEXT = 128          # characters: no real quantity is longer
MAX_EXPONENT = 100      # |decimal exponent|: 1e100 is already absurd for any resource


class QuantityError(ValueError):
    """A value that is not a Kubernetes quantity (the message quotes it)."""


@lru_cache(maxsize=4096)
def _parse_text(text: str) -> Fraction:
    m = _QUANTITY.fullmatch(text)
    if m is None:
        raise QuantityError(f"{text!r} is not a quantity")
    sign, number, suffix = m.groups()
    value = Fraction(number if not number.endswith(".") else number[:-1])
    if suffix in _BINARY:
        value *= 1 << (10 * _BINARY[suffix])
    else:
        exp = int(suffix[1:]) if suffix[:1] in ("e", "E") and len(suffix) > 1 else _DECIMAL[suffix]
        if abs(exp) > MAX_EXPONENT:
            raise QuantityError(f"{text!r} is out of range (exponent beyond +-{MAX_EXPONENT})")
        value *= Fraction(10) ** exp
    return -value if sign == "-" else value


def parse_quantity(value: object) -> Fraction:
    """The exact value of a quantity given as the API writes it (a string; a JSON number also
    reads, as Kubernetes' own decoder accepts one). Raises :class:`QuantityError`."""
    if isinstance(value, bool):
        raise QuantityError(f"{value!r} is not a quantity")
    if isinstance(value, int):
        return Fraction(value)
    if isinstance(value, float):
        if not math.isfinite(value):
            raise QuantityError(f"{value!r} is not a quantity")
        return _parse_text(repr(value))
    if not isinstance(value, str):
        raise QuantityError(f"a {type(value).__name__} is not a quantity")
    if len(value) > MAX_TEXT:
        raise QuantityError(f"{value[:20]!r}... is longer than {MAX_TEXT} characters")
    return _parse_text(value)


def milli_value(q: Fraction) -> int:
    """``Quantity.MilliValue()``: thousandths, rounded up (how CPU is compared)."""
    return math.ceil(q * 1000)


def whole_value(q: Fraction) -> int:
    """``Quantity.Value()``: whole units, rounded up (memory, storage, pods, extended resources)."""
    return math.ceil(q)
