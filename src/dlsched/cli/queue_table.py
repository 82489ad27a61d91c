"""The per-queue table ``simulate`` prints when the cluster file's queues lend and borrow."""

from __future__ import annotations


def print_queues(out, summary: dict) -> None:
    """Guaranteed vs used vs borrowed vs lent GPU time, decayed usage per weight (the fair-share
    order of borrowers), reclaims and queue delay per queue (GPU-hours)."""
    rows = summary.get("per_queue")
    if not rows:
        return
    from rich.table import Table

    table = Table(title="queues (GPU-hours; delay in seconds)")
    cols = ["GPUs", "borrow", "lend", "weight", "guaranteed", "used", "borrowed", "lent", "used/guar.",
            "decayed/weight", "reclaimed", "reclaims", "jobs", "avg_queue_delay"]
    table.add_column("queue")
    for c in cols:
        table.add_column(c, justify="right")
    for name, q in rows.items():
        share = q["share_of_guarantee"]
        table.add_row(name, str(q["guarantee_gpus"]),
                      _limit(q.get("borrow_limit_by_type") or q["borrow_limit"]),
                      _limit(q.get("lend_limit_by_type") or q["lend_limit"]), f"{q['weight']:g}",
                      f"{q['guaranteed_gpu_hours']:,.1f}", f"{q['used_gpu_hours']:,.1f}",
                      f"{q['borrowed_gpu_hours']:,.1f}", f"{q['lent_gpu_hours']:,.1f}",
                      "-" if share is None else f"{share:.3f}", f"{q['usage_per_weight']:,.1f}",
                      f"{q['reclaimed']:,}", f"{q['reclaims']:,}",
                      f"{q['jobs']:,}", f"{q['avg_queue_delay']:,.1f}")
    out.print(table)
    jain, active = summary.get("queue_fairness_jain"), summary.get("queue_fairness_jain_active")
    out.print("Jain's fairness index over used / guaranteed GPU time: "
              + ("-" if jain is None else f"{jain:.4f}")
              + "; over used / (guarantee x time the queue had jobs): "
              + ("-" if active is None else f"{active:.4f}"), highlight=False)


def _limit(value: int | dict | None) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{t} {n:,}" for t, n in value.items()) or "0"
    return "none" if value is None else f"{value:,}"
