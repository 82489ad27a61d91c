"""Benchmark of the CES service on the real Philly node series: forecaster training + 2-week replay.

Run: OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_energy.py [--repeat 3]
Target: <= 10 s for training plus replay (reference CES_Philly.py: 2 min 15 s).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dlsched.energy.series import load_node_series
from dlsched.experiments.helios.energy import ReplayConfig, replay_experiment, resolve_window

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared"))
PAPER = {"avg_powered_off_nodes": 100.1, "daily_wakeups": 0.5, "nodes_per_wakeup": 27.1,
         "node_util_before": 0.690, "node_util_after": 0.904, "smape": 5.29}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    path = SHARED / "traces" / "philly" / "philly_node_sequence.csv.gz"
    if not path.is_file():
        print(f"skipped: {path} not found", file=sys.stderr)
        return 0
    walls: dict[str, list[float]] = {"load": [], "ces (fit+replay)": [], "vanilla (fit+replay)": []}
    for _ in range(args.repeat):
        t0 = time.perf_counter()
        series = load_node_series(path)
        window = resolve_window(series, "2017-12-01", "2017-12-14")
        walls["load"].append(time.perf_counter() - t0)
        for policy in ("ces", "vanilla"):
            t0 = time.perf_counter()
            outcome = replay_experiment(series, window, ReplayConfig(policy=policy))
            walls[f"{policy} (fit+replay)"].append(time.perf_counter() - t0)
            if policy == "ces":
                summary = outcome.summary
    threads = os.environ["OMP_NUM_THREADS"]
    print(f"Philly CES, eval 2017-12-01..14, median of {args.repeat} (OMP_NUM_THREADS={threads})")
    for name, values in walls.items():
        print(f"  {name:<22} {statistics.median(values):6.2f} s")
    print("  reference CES_Philly.py  135.00 s")
    print(f"  {'figure':<24}{'dlsched':>10}{'paper':>10}")
    for key, paper in PAPER.items():
        print(f"  {key:<24}{summary[key]:>10.3f}{paper:>10.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
