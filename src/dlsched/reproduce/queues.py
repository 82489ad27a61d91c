"""Queues that lend and borrow against fixed VCs, with the per-queue report: the built-in
workload (20,000 jobs, seed 0, QSSF) on ``docs/examples/queues-fixed.toml`` and ``queues.toml``.

The per-queue tables follow the other reproductions: each queue's figure of the baseline (fixed
VCs) beside the same figure with borrowing, and the change, in tables narrow enough for an
80-column terminal; queues are the tree's (``metrics.queue_rows``: inner queues indented above
their VCs), not a flat list of VCs."""

from __future__ import annotations

from collections.abc import Mapping

from dlsched.metrics.queue_rows import INNER_NOTE, QueueRow, queue_rows
from dlsched.reproduce.base import NA, Context, Reproduction, Table


def _label(row: QueueRow) -> str:
    """The queue's name, indented by its depth in the tree; inner queues marked."""
    return "  " * row.depth + row.name + (" (inner)" if row.inner else "")


def _round(value: object, digits: int = 1) -> object:
    return NA if value is None else round(value, digits) if digits else round(value)


def _leaves(row: QueueRow, rows: list[QueueRow]) -> list[str]:
    """The VCs (leaf queues) at or under ``row``."""
    if not row.inner:
        return [row.name]
    under = {row.name}
    names = []
    for other in rows:   # depth first: a parent comes before its children
        if other.parent in under:
            under.add(other.name)
            if not other.inner:
                names.append(other.name)
    return names


def fixed_delay(row: QueueRow, rows: list[QueueRow], per_vc: Mapping) -> float | None:
    """The fixed run's average queue delay of ``row``'s jobs (job-weighted over its VCs), None when
    the fixed run has none of them."""
    stats = [per_vc[vc] for vc in _leaves(row, rows) if isinstance(per_vc.get(vc), Mapping)]
    jobs = sum(s.get("jobs", 0) for s in stats)
    if not jobs:
        return None
    return sum(s["jobs"] * s["avg_queue_delay"] for s in stats) / jobs


def delay_table(borrow: dict, fixed: dict, title: str) -> Table | None:
    """Per queue of the borrowing run: jobs, average queue delay with fixed VCs beside the delay
    with borrowing and their difference, and the reclaims; None when the run had no queues that borrow."""
    rows = queue_rows(borrow)
    if not rows:
        return None
    per_vc = fixed.get("per_vc") or {}
    body = []
    for row in rows:
        q = row.figures
        before, after = fixed_delay(row, rows, per_vc), q.get("avg_queue_delay")
        change = NA if before is None or after is None else round(after - before)
        body.append([_label(row), q.get("guarantee_gpus"), q.get("jobs"), _round(before, 0), _round(after, 0), change,
                     q.get("reclaims"), q.get("reclaimed")])
    return Table(title, ["queue", "GPUs", "jobs", "wait, fixed VCs (s)", "wait, with loans (s)", "change (s)",
                         "reclaims it made", "its jobs reclaimed"], body,
                 "wait: average queue delay of the queue's jobs; fixed: the same jobs on the fixed VCs")


def per_queue_table(summary: dict, title: str) -> Table | None:
    """A run's queues (summary.json ``per_queue`` and ``per_inner_queue``) as a table of GPU time
    (GPU-hours) and decayed usage per weight; None when the run had no queues that borrow. The
    weight column is shown when some queue's weight is not 1."""
    rows = queue_rows(summary)
    if not rows:
        return None
    weighted = any(row.figures.get("weight", 1.0) != 1.0 for row in rows)
    columns = ["queue", *(["weight"] if weighted else []), "guaranteed", "used", "borrowed", "lent",
               "decayed usage / weight"]
    body = [[_label(row), *([row.figures.get("weight", 1.0)] if weighted else []),
             _round(row.figures.get("guaranteed_gpu_hours"), 0), _round(row.figures.get("used_gpu_hours"), 0),
             _round(row.figures.get("borrowed_gpu_hours"), 0), _round(row.figures.get("lent_gpu_hours"), 0),
             _round(row.figures.get("usage_per_weight"), 0)]
            for row in rows]
    jain, active = summary.get("queue_fairness_jain"), summary.get("queue_fairness_jain_active")
    note = ("GPU-hours" + ("" if weighted else "; every queue has weight 1")
            + ". Jain's index over used / guaranteed GPU time: " + ("–" if jain is None else f"{jain:.3f}")
            + "; over used / (guarantee x time the queue had jobs): " + ("–" if active is None else f"{active:.3f}"))
    if any(row.inner for row in rows):
        note += ". " + INNER_NOTE
    return Table(title, columns, body, note)


class QueuesBorrowing(Reproduction):
    name = "queues-borrowing"
    title = "Queues that lend and borrow against fixed VCs (built-in workload, QSSF, seed 0)"
    paper = ("no paper: Helios's fixed VC partition against Kueue-style cohorts with borrowing and lending "
             "limits (docs/queues.md)")
    command = ("dlsched simulate --policy qssf --cluster docs/examples/queues.toml --out DIR   "
               "(and --cluster docs/examples/queues-fixed.toml)")
    jobs = 20000

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:
        from dlsched.experiments.dlsched.borrowing import EXAMPLES, simulate

        runs = {}
        for name in ("queues-fixed", "queues"):
            runs[name] = simulate({"jobs": self.jobs, "seed": 0, "policy": "qssf",
                                   "cluster": EXAMPLES / f"{name}.toml"}, ctx.work / name)
        fixed, borrow = runs["queues-fixed"], runs["queues"]
        keys = (("avg queue delay (s)", "avg_queue_delay"), ("avg JCT (s)", "avg_jct"), ("queued jobs", "queued_jobs"))
        rows = [[label, round(fixed[key]), round(borrow[key]),
                 round(borrow[key] / fixed[key], 3) if fixed[key] else NA] for label, key in keys]
        rows.append(["reclaims", 0, sum(q["reclaims"] for q in borrow.get("per_queue", {}).values()), NA])
        tables = [Table(f"{self.jobs:,} built-in jobs, QSSF", ["figure", "fixed VCs", "borrowing", "borrowing / fixed"],
                        rows, "fixed VCs: borrow_limit = 0 (queues-fixed.toml); borrowing: queues.toml")]
        for table in (delay_table(borrow, fixed, "per queue: wait, fixed VCs beside borrowing"),
                      per_queue_table(borrow, "per queue, queues that borrow: GPU time (GPU-h)")):
            if table is not None:
                tables.append(table)
        note = ("the fixed run has no per-queue report: with no queue that may borrow, the queue manager is not "
                "installed and the run is the plain VC partition's, decision for decision")
        return tables, [note]
