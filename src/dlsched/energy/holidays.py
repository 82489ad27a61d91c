"""Public-holiday calendars for the forecaster's holiday flag.

Kept as small literal tables (no third-party calendar package is installed) covering the trace
periods: Philly (Microsoft, Redmond; 2017) uses US federal holidays, Helios (SenseTime; 2020)
uses mainland-China statutory holidays. Callers may pass their own list of dates instead.
"""

from __future__ import annotations

from collections.abc import Iterable

import pandas as pd

_US = (
    "2017-01-02", "2017-01-16", "2017-02-20", "2017-05-29", "2017-07-04", "2017-09-04", "2017-10-09",
    "2017-11-10", "2017-11-23", "2017-11-24", "2017-12-25",
    "2018-01-01", "2018-01-15", "2018-02-19", "2018-05-28", "2018-07-04", "2018-09-03", "2018-10-08",
    "2018-11-12", "2018-11-22", "2018-11-23", "2018-12-25",
)
_CN = (
    "2020-01-01", "2020-01-24", "2020-01-25", "2020-01-26", "2020-01-27", "2020-01-28", "2020-01-29",
    "2020-01-30", "2020-01-31", "2020-02-01", "2020-02-02",
    "2020-04-04", "2020-04-05", "2020-04-06", "2020-05-01", "2020-05-02", "2020-05-03", "2020-05-04",
    "2020-05-05", "2020-06-25", "2020-06-26", "2020-06-27", "2020-10-01", "2020-10-02", "2020-10-03",
    "2020-10-04", "2020-10-05", "2020-10-06", "2020-10-07", "2020-10-08",
)
CALENDARS: dict[str, tuple[str, ...]] = {"us": _US, "cn": _CN, "none": ()}


def holiday_dates(calendar: str | Iterable[str]) -> frozenset[pd.Timestamp]:
    """Normalised dates of a named calendar (``us``, ``cn``, ``none``) or of explicit ISO dates."""
    if isinstance(calendar, str):
        if calendar not in CALENDARS:
            raise ValueError(f"unknown holiday calendar {calendar!r} (choose from {', '.join(CALENDARS)})")
        calendar = CALENDARS[calendar]
    return frozenset(pd.Timestamp(d).normalize() for d in calendar)
