"""The report's per-queue table: every queue of the run's queue tree, inner queues included."""

from __future__ import annotations

import html
from collections.abc import Mapping

from dlsched.metrics.queue_rows import INNER_NOTE, queue_rows
from dlsched.report.fmt import cell
from dlsched.report.page import note
from dlsched.report.tables import render

COLUMNS = (("guarantee_gpus", "GPUs"), ("borrow_limit", "Borrow limit"), ("lend_limit", "Lend limit"),
           ("weight", "Weight"), ("guaranteed_gpu_hours", "Guaranteed (GPU-h)"), ("used_gpu_hours", "Used (GPU-h)"),
           ("borrowed_gpu_hours", "Borrowed (GPU-h)"), ("lent_gpu_hours", "Lent (GPU-h)"),
           ("share_of_guarantee", "Used / guaranteed"), ("usage_per_weight", "Decayed usage / weight (GPU-h)"),
           ("reclaimed", "Reclaimed"), ("reclaims", "Reclaims"), ("jobs", "Jobs"),
           ("avg_queue_delay", "Avg queue delay (s)"))


def queues_table(summary: Mapping) -> str | None:
    """One row per queue in tree order (children indented under their parent); None without queues."""
    rows = queue_rows(summary)
    if not rows:
        return None
    body = []
    for row in rows:
        q = row.figures
        mark = ' <span class="muted">(inner)</span>' if row.inner else ""
        pad = f' style="padding-left:{18 * row.depth}px"' if row.depth else ""
        name = f'<span class="queue{" inner" if row.inner else ""}"{pad}>{html.escape(row.name)}</span>{mark}'
        cells = [_limit(q.get(f"{key}_by_type") or q.get(key)) if key.endswith("_limit")
                 else _figure(key, q.get(key)) for key, _ in COLUMNS]
        body.append([name, *cells])
    table = render(["Queue", *(title for _, title in COLUMNS)], body, cls="queues")
    jain, active = summary.get("queue_fairness_jain"), summary.get("queue_fairness_jain_active")
    fairness = note("Jain's fairness index over used / guaranteed GPU time: " + _fixed(jain)
                    + "; over used / (guarantee × time the queue had jobs): " + _fixed(active) + ".")
    inner = note(INNER_NOTE) if any(row.inner for row in rows) else ""
    return table + inner + fairness


def _figure(key: str, value: object) -> str:
    """GPU-hours and ratios with fixed decimals (they are compared down a column), else fmt.cell."""
    if isinstance(value, float) and (key.endswith("_hours") or key in ("share_of_guarantee", "usage_per_weight")):
        return f"{value:,.3f}" if key == "share_of_guarantee" else f"{value:,.1f}"
    return cell(key, value)


def _limit(value: object) -> str:
    """A limit in GPUs, per GPU type, or 'none' (no limit)."""
    if isinstance(value, Mapping):
        return html.escape(", ".join(f"{t} {n:,}" for t, n in value.items()) or "0")
    return "none" if value is None else html.escape(f"{value:,}")


def _fixed(value: object) -> str:
    return "—" if value is None else f"{value:.4f}"
