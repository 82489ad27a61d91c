"""The per-queue table ``simulate`` prints when the cluster file's queues lend and borrow."""

from __future__ import annotations

from dlsched.metrics.queue_rows import INNER_NOTE, queue_rows


def print_queues(out, summary: dict) -> None:
    """Guaranteed vs used vs borrowed vs lent GPU time, decayed usage per weight (the fair-share
    order of borrowers), reclaims and queue delay per queue (GPU-hours); every queue of a tree,
    inner queues indented above their children and marked ``(inner)``."""
    rows = queue_rows(summary)
    if not rows:
        return
    from rich.table import Table

    table = Table(title="queues (GPU-hours; delay in seconds)")
    cols = ["GPUs", "borrow", "lend", "weight", "guaranteed", "used", "borrowed", "lent", "used/guar.",
            "decayed/weight", "reclaimed", "reclaims", "jobs", "avg_queue_delay"]
    names = ["  " * row.depth + row.name + (" (inner)" if row.inner else "") for row in rows]
    table.add_column("queue", no_wrap=True, min_width=max(map(len, names)))  # the tree's indent must not wrap
    for c in cols:
        table.add_column(c, justify="right")
    for row, name in zip(rows, names):
        q = row.figures
        table.add_row(name, _int(q.get("guarantee_gpus")),
                      _limit(q.get("borrow_limit_by_type") or q.get("borrow_limit")),
                      _limit(q.get("lend_limit_by_type") or q.get("lend_limit")), _num(q.get("weight"), "g"),
                      _num(q.get("guaranteed_gpu_hours")), _num(q.get("used_gpu_hours")),
                      _num(q.get("borrowed_gpu_hours")), _num(q.get("lent_gpu_hours")),
                      _num(q.get("share_of_guarantee"), ".3f"), _num(q.get("usage_per_weight")),
                      _int(q.get("reclaimed")), _int(q.get("reclaims")),
                      _int(q.get("jobs")), _num(q.get("avg_queue_delay")))
    out.print(table)
    if any(row.inner for row in rows):
        out.print(f"note: {INNER_NOTE}", highlight=False)
    jain, active = summary.get("queue_fairness_jain"), summary.get("queue_fairness_jain_active")
    out.print("Jain's fairness index over used / guaranteed GPU time: "
              + ("-" if jain is None else f"{jain:.4f}")
              + "; over used / (guarantee x time the queue had jobs): "
              + ("-" if active is None else f"{active:.4f}"), highlight=False)


def _num(value: object, spec: str = ",.1f") -> str:
    """A figure, or '-' where summary.json has none (null)."""
    return "-" if value is None else format(value, spec)


def _int(value: object) -> str:
    return "-" if value is None else f"{value:,}"


def _limit(value: int | dict | None) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{t} {n:,}" for t, n in value.items()) or "0"
    return "none" if value is None else f"{value:,}"
