"""Simulator speed and memory (issue 2 targets). Prints its figures; run: make bench
or `.venv/bin/python benchmarks/bench_simulator.py [--skip-million]`.

1. The 68,503 Philly jobs of the Helios reference window (../shared): FIFO alone (jobs/s,
   simulation only), and FIFO+SJF+SRTF together as `dlsched compare` runs them (load, three
   policies in parallel processes, results written), wall time and peak memory.
   Targets: together <= 3.5 s (the reference needs 5 min 57 s for four policies, 56 s for FIFO),
   FIFO >= 200,000 jobs/s, peak <= 1 GiB.
2. 1,000,000 synthetic jobs on a 1,000-node cluster: jobs/s and peak memory.
"""

from __future__ import annotations

import argparse
import resource
import sys
import tempfile
import time
from pathlib import Path

from dlsched.core.cluster import ClusterSpec
from dlsched.registry import make_policy
from dlsched.runner import RunSpec, compare_policies
from dlsched.sim import SimConfig, Simulator

SHARED = Path(__file__).resolve().parents[1].parent / "shared"
REF = SHARED / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
VCS = SHARED / "traces/philly/philly_vc_config.csv"


def peak_mib() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    kids = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, kids) / 1024.0


def philly() -> None:
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    t0 = time.perf_counter()
    vc_nodes = load_vc_config(VCS)
    trace = load_trace(REF, "helios-log", start="2017-10-01 00:00:00", end="2017-11-30 23:59:00", vcs=list(vc_nodes))
    load_s = time.perf_counter() - t0
    cluster = ClusterSpec.from_vc_sizes(vc_nodes)
    n = len(trace.jobs)
    print(f"philly: {n} jobs, {len(cluster.nodes)} nodes; load {load_s:.2f} s")
    best = {}
    for policy in ("fifo", "sjf", "srtf"):
        runs = []
        for _ in range(3):
            sim = Simulator(cluster, make_policy(policy), SimConfig(compat="helios"))
            t = time.perf_counter()
            sim.run(trace.jobs)
            runs.append(time.perf_counter() - t)
        best[policy] = min(runs)
        print(f"  {policy:5s} alone: {best[policy]:.3f} s  ->  {n / best[policy]:,.0f} jobs/s (best of 3)")
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        trace = load_trace(REF, "helios-log", start="2017-10-01 00:00:00", end="2017-11-30 23:59:00",
                           vcs=list(vc_nodes))
        compare_policies(trace.jobs, cluster, ["fifo", "sjf", "srtf"], tmp, RunSpec(config=SimConfig(compat="helios")))
        wall = time.perf_counter() - t0
    print(f"  fifo+sjf+srtf together (load + 3 policies in parallel + write results): {wall:.2f} s wall "
          f"(target <= 3.5 s; reference 357 s for its four policies)")
    print(f"  peak memory: {peak_mib():.0f} MiB (target <= 1024)")


def million() -> None:
    from dlsched.traces import synthetic

    t0 = time.perf_counter()
    trace = synthetic.generate(jobs=1_000_000, seed=1, days=60)
    gen_s = time.perf_counter() - t0
    nodes = 1000
    vcs = sorted({j.vc for j in trace.jobs})
    per = {vc: nodes // len(vcs) + (1 if i < nodes % len(vcs) else 0) for i, vc in enumerate(vcs)}
    cluster = ClusterSpec.from_vc_sizes(per)
    for job in trace.jobs:  # keep every job placeable on its VC
        job.gpus = min(job.gpus, per[job.vc] * 8)
    print(f"synthetic: 1,000,000 jobs generated in {gen_s:.1f} s; {nodes} nodes in {len(vcs)} VCs")
    for policy in ("fifo", "sjf"):  # SRTF re-ranks every running job at each pass: see the README
        sim = Simulator(cluster, make_policy(policy))
        t = time.perf_counter()
        res = sim.run(trace.jobs)
        el = time.perf_counter() - t
        util = res.metrics.gpu_utilization()
        print(f"  {policy:5s}: {el:.1f} s -> {1_000_000 / el:,.0f} jobs/s (GPU utilisation {util:.2f})")
    print(f"  peak memory: {peak_mib():.0f} MiB")


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("--skip-million", action="store_true")
    args = ap.parse_args()
    if REF.exists():
        philly()
    else:
        print(f"philly: skipped ({REF} not found)", file=sys.stderr)
    if not args.skip_million:
        million()
