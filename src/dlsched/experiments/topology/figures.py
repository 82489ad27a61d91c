"""The paper's per-policy figures (Sec. 5: cumulative time, slowdown, waits, SLO violations) and the
per-job timeline (Fig. 8 a-d), from jobs simulated on the main engine plus the topology audit.

Execution time is ``end - start`` (no job is preempted in these experiments); the slowdown is the
execution time over the solo time on the best placement (the job's true duration); an SLO is
violated when the slowdown exceeds the job's ``slo_slowdown`` (1.2 in the paper's workloads).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.experiments.topology.audit import PlacementAudit


def summarize(jobs: Sequence[Job], audit: PlacementAudit, postponements: int,
              slo: Mapping[str, float]) -> dict:
    """Figures of one policy (``slo``: job id -> largest acceptable slowdown)."""
    start = np.array([j.start_time for j in jobs])
    end = np.array([j.end_time for j in jobs])
    arrival = np.array([j.submit_time for j in jobs])
    solo = np.array([true_duration(j) for j in jobs])
    limit = np.array([slo[j.job_id] for j in jobs])
    floor = np.array([j.min_utility for j in jobs])
    util = np.array([audit.utility[j.job_id] for j in jobs])
    exec_t, waits = end - start, start - arrival
    slow = exec_t / solo
    return {
        "jobs": len(jobs),
        "cumulative_time": round(float(exec_t.sum()), 3),
        "makespan": round(float(end.max() - arrival.min()), 3),
        "total_response_time": round(float((end - arrival).sum()), 3),
        "slowdown": round(float(slow.mean()), 4),
        "slowdown_max": round(float(slow.max()), 4),
        "slowdown_with_wait": round(float(((end - arrival) / solo).mean()), 4),
        "jobs_slowed_over_5pct": int((slow > 1.05).sum()),
        "mean_wait": round(float(waits.mean()), 3),
        "p95_wait": round(float(np.percentile(waits, 95)), 3),
        "max_wait": round(float(waits.max()), 3),
        "slo_violations": int((slow > limit + 1e-9).sum()),
        "placed_below_min_utility": int((util < floor - 1e-9).sum()),
        "postponements": int(postponements),
    }


def timeline_rows(policy: str, jobs: Sequence[Job], audit: PlacementAudit,
                  postponed: Mapping[str, int]) -> list[dict]:
    """Fig. 8 (a)-(d): which GPUs each job held and when."""
    rows = []
    for j in jobs:
        jid = j.job_id
        gpus = ";".join(f"M{m}:GPU{g}" for m, mask in audit.placement[jid] for g in set_bits(mask))
        exec_t = j.end_time - j.start_time
        rows.append({
            "policy": policy, "job": jid, "model": j.model_name, "batch": j.batch_size, "gpus_requested": j.gpus,
            "arrival": round(j.submit_time, 3), "start": round(j.start_time, 3), "end": round(j.end_time, 3),
            "wait": round(j.start_time - j.submit_time, 3), "exec_time": round(exec_t, 3),
            "solo_time": true_duration(j), "slowdown": round(exec_t / true_duration(j), 4),
            "placement_factor": round(audit.factor[jid], 4),
            "utility": round(audit.utility[jid], 4), "postponements": postponed.get(jid, 0), "gpus": gpus,
        })
    return rows
