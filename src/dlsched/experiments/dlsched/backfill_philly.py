"""The backfill experiment's Philly input: the Helios reference run's window (Oct-Nov 2017,
68,503 jobs), optionally its first N jobs, on one pool of 8-GPU nodes, with user-style time limits
drawn per seed.

Philly's jobs are fixed; only the limits differ between seeds (``apply_time_limits`` seeded by the
seed), so a seed pairs every variant on the same jobs with the same limits. Each seed gets fresh
copies of the jobs: a drawn limit must not leak into the next seed (jobs with a limit keep it).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path

WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")   # the reference run's window


def philly_source(trace: Path, jobs: int | None, nodes: int, limits: str) -> tuple[Callable[[int], object], dict]:
    """``seed -> Inputs`` for the Philly window (first ``jobs`` jobs by submit time, all when None)
    on a pool of ``nodes`` nodes, and what was loaded (jobs, left out wider than the pool)."""
    from dlsched.run.build import Inputs
    from dlsched.runner import cluster_for
    from dlsched.traces.api import load_trace
    from dlsched.traces.time_limits import apply_time_limits, parse_time_limits

    if not Path(trace).is_file():
        raise FileNotFoundError(f"the Philly trace {trace} is not there (give --shared DIR or set DLSCHED_SHARED)")
    spec = parse_time_limits(limits)
    tr = load_trace(Path(trace), "helios-log", start=WINDOW[0], end=WINDOW[1])
    ordered = sorted(tr.jobs, key=lambda j: (j.submit_time, j.index))
    window = len(ordered)
    chosen = ordered if jobs is None else ordered[:jobs]
    fits = [j for j in chosen if j.gpus <= nodes * 8]
    info = {"window_jobs": window, "jobs": len(fits), "too_wide": len(chosen) - len(fits)}

    def inputs(seed: int) -> Inputs:
        mine = copy.deepcopy(fits)
        cluster = cluster_for(mine, None, nodes, 8)
        apply_time_limits(mine, spec, seed)
        return Inputs(mine, cluster, tr.origin, str(trace), "V100")

    return inputs, info
