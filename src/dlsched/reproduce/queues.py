"""Queues that lend and borrow against fixed VCs, with the per-queue report: the built-in
workload (20,000 jobs, seed 0, QSSF) on ``docs/examples/queues-fixed.toml`` and ``queues.toml``."""

from __future__ import annotations

from dlsched.reproduce.base import Context, Reproduction, Table


def per_queue_table(summary: dict, title: str) -> Table | None:
    """A run's ``per_queue`` (summary.json) as a table; None when the run had no queues that borrow."""
    rows = summary.get("per_queue")
    if not rows:
        return None
    columns = ["queue", "GPUs", "weight", "guaranteed GPU-h", "used GPU-h", "borrowed GPU-h", "lent GPU-h",
               "reclaims", "reclaimed", "avg queue delay (s)", "decayed usage / weight (GPU-h)"]
    body = [[name, q["guarantee_gpus"], q.get("weight", 1.0), round(q["guaranteed_gpu_hours"], 1),
             round(q["used_gpu_hours"], 1), round(q["borrowed_gpu_hours"], 1), round(q["lent_gpu_hours"], 1),
             q["reclaims"], q["reclaimed"], round(q["avg_queue_delay"]),
             None if q.get("usage_per_weight") is None else round(q["usage_per_weight"], 1)]
            for name, q in rows.items()]
    jain, active = summary.get("queue_fairness_jain"), summary.get("queue_fairness_jain_active")
    note = ("Jain's index over used / guaranteed GPU time: " + ("–" if jain is None else f"{jain:.3f}")
            + "; over used / (guarantee x time the queue had jobs): " + ("–" if active is None else f"{active:.3f}"))
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
        rows = [[label, round(s["avg_queue_delay"]), round(s["avg_jct"]), s["queued_jobs"],
                 sum(q["reclaims"] for q in s.get("per_queue", {}).values())]
                for label, s in (("fixed VCs (borrow_limit = 0)", fixed), ("queues that borrow", borrow))]
        tables = [Table(f"{self.jobs:,} built-in jobs, QSSF", ["cluster file", "avg queue delay (s)", "avg JCT (s)",
                                                               "queued jobs", "reclaims"], rows)]
        queues = per_queue_table(borrow, "per queue, queues that borrow")
        if queues is not None:
            tables.append(queues)
        note = ("the fixed run has no per-queue report: with no queue that may borrow, the queue manager is not "
                "installed and the run is the plain VC partition's, decision for decision")
        return tables, [note]
