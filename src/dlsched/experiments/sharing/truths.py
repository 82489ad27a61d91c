"""Why the truths give different answers, measured (docs/sharing-policies.md, issue 23): OBP and
Horus on W-Large over seeds, per truth and prediction kind, with their paired gain over FIFO, OOM
crashes, and, from the per-job history, the time-weighted rate of a job while it shares a GPU
(the pair's combined throughput is about twice that) and the job-hours spent sharing."""

from __future__ import annotations

import statistics
from itertools import pairwise

from dlsched.experiments.protocol import paired_gain
from dlsched.experiments.sharing.run import PolicyRun, over_seeds
from dlsched.models.truth import resolve_truth

POLICIES = (PolicyRun("OBP", "obp", 2), PolicyRun("Horus", "horus", 2, (("k", 1),)))


def shared_rate(rows: list[tuple]) -> tuple[float, float]:
    """(time-weighted rate while a co-runner is present, job-seconds spent so) of history rows."""
    by: dict[tuple, list[tuple]] = {}
    for r in rows:
        by.setdefault((r[0], r[1], r[2]), []).append(r)
    num = den = 0.0
    for seq in by.values():
        for a, b in pairwise(seq):
            if a[5]:
                dt = b[3] - a[3]
                num += a[4] * dt
                den += dt
    return (num / den if den else float("nan")), den


def why_truths_differ(seeds: list[int], truths: tuple[str, ...] = ("builtin", "builtin-raw", "lucid"),
                      workload: str = "horus-wlarge") -> list[dict]:
    """One row per (truth, predictions, policy)."""
    rows = []
    specs = [PolicyRun("FIFO", "fifo", 1), *POLICIES]
    for name in truths:
        truth = resolve_truth(name)
        for predictions in ("real", "perfect"):
            history: list = []
            runs = over_seeds(workload, specs, seeds, predictions, truth=truth, history=history)
            base = [r.metrics["makespan"] for r in runs["FIFO"]]
            for spec in POLICIES:
                g = paired_gain(base, [r.metrics["makespan"] for r in runs[spec.label]])
                rate, job_s = shared_rate([h for h in history if h[0] == spec.label])
                rows.append({"truth": name, "predictions": predictions, "policy": spec.label, **g.as_dict(),
                             "oom": statistics.fmean(r.metrics["failures"] for r in runs[spec.label]),
                             "shared_rate": rate, "shared_job_hours": job_s / 3600 / len(seeds)})
    return rows
