"""Labels and number formatting shared by tables and plots.

Durations stay in seconds (as in summary.json, so numbers can be cross-checked) with a
human-readable hint next to them; ratios get three decimals; utilisation fractions become percent.
"""

from __future__ import annotations

import html
import math
from numbers import Integral, Real

LABELS: dict[str, str] = {
    "policy": "Policy",
    "placement": "Placement",
    "trace": "Trace",
    "jobs": "Jobs",
    "avg_jct": "Avg JCT (s)",
    "median_jct": "Median JCT (s)",
    "p95_jct": "P95 JCT (s)",
    "p99_jct": "P99 JCT (s)",
    "avg_queue_delay": "Avg queue delay (s)",
    "median_queue_delay": "Median queue delay (s)",
    "p95_queue_delay": "P95 queue delay (s)",
    "p99_queue_delay": "P99 queue delay (s)",
    "queued_jobs": "Queued jobs",
    "makespan": "Makespan (s)",
    "gpu_utilization": "GPU utilisation",
    "preemptions": "Preemptions",
    "ratio_avg_jct": "Avg JCT ratio",
    "ratio_avg_queue_delay": "Avg queue delay ratio",
    "ratio_queued_jobs": "Queued jobs ratio",
    "avg_powered_off_nodes": "Avg powered-off nodes",
    "daily_wakeups": "Daily wake-ups",
    "nodes_per_wakeup": "Nodes per wake-up",
    "node_util_before": "Node utilisation before",
    "node_util_after": "Node utilisation after",
    "smape": "SMAPE",
    "rmse": "RMSE",
}

SECONDS_HINTS = ("jct", "delay", "makespan", "duration", "_time", "seconds")


def label(key: str) -> str:
    """Human label for a metric key; unknown keys get a readable fallback."""
    if key in LABELS:
        return LABELS[key]
    words = key.replace("_", " ").replace(".", " · ").strip()
    words = words.replace("jct", "JCT").replace("gpu", "GPU").replace("kwh", "kWh")
    return words[:1].upper() + words[1:]


def is_seconds(key: str) -> bool:
    """Whether a metric key holds a duration in seconds."""
    k = key.lower()
    return not k.startswith("ratio") and any(h in k for h in SECONDS_HINTS)


def is_fraction(key: str) -> bool:
    """Whether a metric key holds a utilisation that reads best as a percentage."""
    return "util" in key.lower()


def human_duration(seconds: float) -> str:
    """Short duration such as '42 s', '20.6 min', '3.1 h' or '2.4 d'."""
    s = abs(seconds)
    if s < 90:
        return f"{seconds:.0f} s"
    if s < 5400:
        return f"{seconds / 60:.1f} min"
    if s < 172800:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 86400:.1f} d"


def plain_number(value: float) -> str:
    """Compact float: one decimal for large numbers, more for small ones."""
    if float(value).is_integer() and abs(value) < 1e15:
        return str(int(value))
    a = abs(value)
    if a >= 100:
        return f"{value:.1f}"
    if a >= 1:
        return f"{value:.2f}"
    return f"{value:.4g}"


def is_missing(value: object) -> bool:
    """None, NaN and empty strings all render as a dash."""
    return value is None or value == "" or (isinstance(value, float) and math.isnan(value))


def cell(key: str, value: object) -> str:
    """HTML (escaped) for one table cell value of metric ``key``."""
    if is_missing(value):
        return '<span class="muted">—</span>'
    if isinstance(value, bool) or not isinstance(value, Real):
        return html.escape(str(value))
    if isinstance(value, Integral):
        return str(int(value))
    x = float(value)
    if math.isinf(x):
        return "∞" if x > 0 else "−∞"
    if key.startswith("ratio"):
        return f"{x:.3f}×"
    if is_fraction(key) and 0 <= x <= 1:
        return f"{x * 100:.1f}%"
    if is_seconds(key):
        text = f"{x:.1f}" if not x.is_integer() else str(int(x))
        return f'{text} <span class="muted">{human_duration(x)}</span>' if abs(x) >= 90 else text
    return plain_number(x)


def time_unit(span_seconds: float) -> tuple[float, str]:
    """Divisor and axis label for a time axis spanning ``span_seconds``."""
    if span_seconds >= 2 * 86400:
        return 86400.0, "days"
    if span_seconds >= 2 * 3600:
        return 3600.0, "hours"
    if span_seconds >= 120:
        return 60.0, "minutes"
    return 1.0, "seconds"
