"""Cost of the online QSSF duration estimator over the Philly window (68,503 jobs, Oct–Nov 2017):
one ``estimate`` at every submission, one ``observe_finished`` at every end, GBDT refits daily.

Budget: ≤ ~15 s for the whole pass (QSSF with online refits must stay ≤ 30 s end to end).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_duration.py [--trace PATH] [--refit-every 86400]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dlsched.core.truth import duration as recorded
from dlsched.predictors.duration.accuracy import replay
from dlsched.predictors.duration.online import OnlineDurationEstimator
from dlsched.traces import load_trace

REPO = Path(__file__).resolve().parents[1]
PHILLY = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared")) / \
    "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=PHILLY)
    ap.add_argument("--start", default="2017-10-01 00:00:00")
    ap.add_argument("--end", default="2017-11-30 23:59:00")
    ap.add_argument("--refit-every", type=float, default=86400.0)
    ap.add_argument("--n-estimators", type=int, default=100)
    args = ap.parse_args()

    t0 = time.perf_counter()
    trace = load_trace(args.trace, start=args.start, end=args.end)
    t_load = time.perf_counter() - t0
    est = OnlineDurationEstimator(refit_every=args.refit_every, n_estimators=args.n_estimators,
                                  origin=trace.origin)
    durations = list(map(recorded, trace.jobs))  # what each job reveals when it ends
    t0 = time.perf_counter()
    replay(trace.jobs, est, durations)
    total = time.perf_counter() - t0
    n = len(trace.jobs)
    rest = total - est.refit_seconds
    print(f"trace            {args.trace.name}: {n:,} jobs (loaded in {t_load:.2f} s)")
    print(f"online pass      {total:.2f} s  (observe + estimate for every job, "
          f"{est.n_refits} refits every {args.refit_every:g} s)")
    print(f"  GBDT refits    {est.refit_seconds:.2f} s  ({est.refit_seconds / max(est.n_refits, 1) * 1e3:.0f} ms each, "
          f"incl. batch re-prediction of pending jobs)")
    print(f"  per job        {rest / n * 1e6:.1f} µs  (observe + estimate, excluding refits)")


if __name__ == "__main__":
    main()
