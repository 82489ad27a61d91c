"""Strict JSON for the files a run writes (``summary.json``): no ``Infinity`` or ``NaN``.

Python's ``json`` writes ``Infinity``/``NaN`` by default, which strict parsers (``jq``, browsers,
most languages' standard readers) refuse. The rule here: a non-finite number is written as
``null`` and its place is listed under the top-level ``non_finite`` key (``per_queue.vc01.x``),
so the change is said in the file itself; callers print a ``warning:`` from that list.
"""

from __future__ import annotations

import json
import math
from typing import Any

NON_FINITE_KEY = "non_finite"


def finite(value: Any, where: str = "", found: list[str] | None = None) -> Any:
    """``value`` with every non-finite float replaced by None; each place appended to ``found``."""
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        if found is not None:
            found.append(where or "(the value)")
        return None
    if isinstance(value, dict):
        return {k: finite(v, f"{where}.{k}" if where else str(k), found) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v, f"{where}[{i}]", found) for i, v in enumerate(value)]
    if getattr(value, "ndim", None) == 0 and hasattr(value, "item"):   # a numpy scalar
        return finite(value.item(), where, found)
    return value


def strict_summary(summary: dict) -> tuple[dict, list[str]]:
    """``summary`` ready for strict JSON, and the keys whose values were not finite (listed in it
    under ``non_finite`` too, when there are any)."""
    found: list[str] = []
    clean = finite({k: v for k, v in summary.items() if k != NON_FINITE_KEY}, "", found)
    earlier = summary.get(NON_FINITE_KEY) or []
    places = [*earlier, *(p for p in found if p not in earlier)]
    if places:
        clean[NON_FINITE_KEY] = places
    return clean, places


def dumps(value: Any, indent: int | None = 2) -> str:
    """Strict JSON text of ``value`` (non-finite numbers as null, listed under ``non_finite`` when
    ``value`` is a table); numbers json cannot write are converted with ``float``."""
    if isinstance(value, dict):
        value, _ = strict_summary(value)
    else:
        value = finite(value)
    return json.dumps(value, indent=indent, allow_nan=False, default=_number)


def _number(value: Any) -> Any:
    number = float(value)
    return number if math.isfinite(number) else None
