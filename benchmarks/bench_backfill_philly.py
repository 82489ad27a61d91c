"""A whole ``dlsched simulate`` with EASY on Philly beside FIFO's, in the same run (issue 35 pt 5).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_backfill_philly.py [--shared ../shared] [--rounds 2]
        [--variants fifo,easy-limit,easy-pred,qssf] [--end '2017-11-30 23:59:00']

Each variant is the command a user types (``dlsched simulate`` on the reference window's 68,503
Philly jobs, the reference VC sizes, limits drawn by ``--time-limits overestimate=1:5,round=900``
for every variant so that each reads the same input), run as a child process; its CPU time (user +
system, the child's ``getrusage``: imports, trace load and simulation) is what is compared, as
wall time on the shared machine mostly measures the neighbours. Rounds alternate the variants so
that drift hits all alike; the best round of each is printed with its ratio to FIFO's.
``easy-limit`` is EASY with the users' limits (``estimate=limit``); ``easy-pred`` with QSSF's
online estimator (the default), whose cost is the estimator's: ``qssf``, which runs the same
estimator without reservations, is its baseline. An earlier ``--end`` cuts the window (a smoke
test).
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REF = "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
VC = "traces/philly/philly_vc_config.csv"
END = "2017-11-30 23:59:00"   # the reference window's end
VARIANTS = {"fifo": ["--policy", "fifo"], "easy-limit": ["--policy", "easy", "--param", "estimate=limit"],
            "easy-pred": ["--policy", "easy"], "qssf": ["--policy", "qssf"]}


def command(shared: Path, variant: str, out: Path, end: str) -> list[str]:
    """The ``dlsched simulate`` command line of ``variant``."""
    cmd = [sys.executable, "-c", "from dlsched.cli.main import app; app()", "simulate",
           "--trace", str(shared / REF), "--vc-config", str(shared / VC),
           "--start", "2017-10-01 00:00:00", "--end", end,
           "--time-limits", "overestimate=1:5,round=900", "--out", str(out), *VARIANTS[variant]]
    return cmd


def run_one(cmd: list[str]) -> tuple[float, float]:
    """CPU seconds (user + system) and wall seconds of one child command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   env={**os.environ, "OMP_NUM_THREADS": "1"})
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shared", type=Path, default=Path(os.environ.get("DLSCHED_SHARED", "../shared")))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--variants", default="fifo,easy-limit,easy-pred,qssf")
    ap.add_argument("--end", default=END)
    args = ap.parse_args()
    names = [v.strip() for v in args.variants.split(",") if v.strip()]
    unknown = [v for v in names if v not in VARIANTS]
    if unknown or "fifo" not in names:
        print(f"error: --variants: {', '.join(unknown) or 'fifo missing'} (known: {', '.join(VARIANTS)}; "
              f"fifo is the baseline)", file=sys.stderr)
        raise SystemExit(2)
    if not (args.shared / REF).is_file():
        print(f"error: --shared: {args.shared / REF} not found (the Philly reference run)", file=sys.stderr)
        raise SystemExit(2)
    cpu: dict[str, list[float]] = {v: [] for v in names}
    wall: dict[str, list[float]] = {v: [] for v in names}
    with tempfile.TemporaryDirectory(prefix="bench-backfill-philly-") as tmp:
        for _ in range(args.rounds):
            for v in names:
                c, w = run_one(command(args.shared, v, Path(tmp) / v, args.end))
                cpu[v].append(c)
                wall[v].append(w)
    window = "68,503 jobs" if args.end == END else f"the window up to {args.end}"
    print(f"dlsched simulate on Philly ({window}, reference VC sizes), best of {args.rounds} rounds, "
          f"CPU seconds (user + system) of the whole command:")
    base = min(cpu["fifo"])
    for v in names:
        print(f"  {v:<11} {min(cpu[v]):8.2f} s CPU  ({min(wall[v]):8.2f} s wall)  {min(cpu[v]) / base:5.2f}x fifo")
    if "easy-pred" in names and "qssf" in names:
        print(f"  easy-pred / qssf (the same estimator): {min(cpu['easy-pred']) / min(cpu['qssf']):.2f}x")


if __name__ == "__main__":
    main()
