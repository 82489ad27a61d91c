"""Cost of topology-aware placement on the main engine, side by side with consolidate.

The same job list (the built-in synthetic workload, 3,000 jobs, seed 0) on the same engine (FIFO,
one pool of 16 DGX-1 nodes), once with ``consolidate`` and once with ``topo-aware-p`` (and
``topo-aware``), each with no speed model and with the topology speed model; best of ``--repeat``
runs, in CPU seconds of this process (steadier than wall time on a shared machine). Target: ``topo-aware-p`` at most 3x ``consolidate`` (it was ~40-77x when the placer rebuilt a
topology state on every call).

Usage: python benchmarks/bench_topology.py [--jobs 3000] [--nodes 16] [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import time

from dlsched.core.cluster import ClusterSpec
from dlsched.registry import make_policy, make_speed_model
from dlsched.sim import SimConfig, Simulator
from dlsched.traces import synthetic

PLACERS = ("consolidate", "topo-aware", "topo-aware-p")
TARGET = 3.0


def best_time(cluster: ClusterSpec, jobs: list, placement: str, speed: str, repeat: int) -> float:
    runs = []
    for _ in range(repeat):
        sim = Simulator(cluster, make_policy("fifo", placement), SimConfig(),
                        speed_model=make_speed_model(speed, cluster))
        t0 = time.process_time()
        sim.run(jobs)
        runs.append(time.process_time() - t0)
    return min(runs)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=3000)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    jobs = synthetic.generate(jobs=args.jobs, seed=0).jobs
    for job in jobs:
        job.vc = "all"
    cluster = ClusterSpec.from_vc_sizes({"all": args.nodes}, 8, topology="dgx1")
    print(f"{len(jobs)} jobs, {args.nodes} DGX-1 nodes, FIFO; best of {args.repeat} (CPU seconds)")
    print(f"{'speed model':12s} " + " ".join(f"{p:>13s}" for p in PLACERS) + "   topo-aware-p / consolidate")
    results = {}
    for speed in ("none", "topology"):
        secs = {p: best_time(cluster, jobs, p, speed, args.repeat) for p in PLACERS}
        ratio = secs["topo-aware-p"] / secs["consolidate"]
        results[speed] = {**{p: round(s, 4) for p, s in secs.items()}, "ratio": round(ratio, 2)}
        verdict = ("target met" if ratio <= TARGET else f"over the {TARGET:g}x target") if speed == "topology" \
            else "placement cost alone"
        print(f"{speed:12s} " + " ".join(f"{secs[p]:13.3f}" for p in PLACERS) + f"   {ratio:.2f}x ({verdict})")
    print(json.dumps(results))


if __name__ == "__main__":
    main()
