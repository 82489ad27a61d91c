"""Print p50/p99 latency of one TOPO-AWARE placement decision on a 1,000-machine cluster.

Usage: python benchmarks/bench_placement.py [--machines 1000] [--decisions 500] [--preset dgx1]
Targets: p50 <= 10 ms, p99 <= 50 ms (the paper reports ~3 s per decision, Sec. 5.5.3).
The decision is the topo-aware plug-in of the main placement pipeline on a kernel state it
observes. Whole simulations, topo-aware(-p) against consolidate: benchmarks/bench_topology.py.
"""

from __future__ import annotations

import argparse
import json

from dlsched.experiments.topology.bench import bench_placement


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", type=int, default=1000)
    ap.add_argument("--decisions", type=int, default=500)
    ap.add_argument("--preset", default="dgx1")
    ap.add_argument("--occupancy", type=float, default=0.7)
    ap.add_argument("--postpone", action="store_true", help="TOPO-AWARE-P instead of TOPO-AWARE")
    args = ap.parse_args()
    res = bench_placement(args.machines, args.decisions, args.preset, args.occupancy, args.postpone)
    print(f"p50_ms={res['p50_ms']} p99_ms={res['p99_ms']}")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
