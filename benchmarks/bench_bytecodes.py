"""Python bytecodes executed by ``Simulator.run`` on the first N Philly jobs of the Helios reference
window (../shared): a deterministic measure of the kernel loop's work, for before/after comparisons
on a machine too loaded for timings. Run: `python benchmarks/bench_bytecodes.py [N] [policy ...]`
(default 20000 jobs, fifo sjf srtf horus); run it on both trees and compare the counts.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dlsched.core.cluster import ClusterSpec
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.traces.api import load_trace
from dlsched.traces.vc import load_vc_config

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "philly"


def count(jobs: list, cluster: ClusterSpec, policy: str) -> int:
    """Bytecodes executed while one run simulates ``jobs``."""
    seen = [0]

    def local(frame, event, arg):
        if event == "opcode":
            seen[0] += 1
        return local

    def enter(frame, event, arg):
        frame.f_trace_opcodes = True
        return local

    sim = Simulator(cluster, make_policy(policy), SimConfig())
    sys.settrace(enter)
    try:
        sim.run(jobs)
    finally:
        sys.settrace(None)
    return seen[0]


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20000
    policies = sys.argv[2:] or ["fifo", "sjf", "srtf", "horus"]
    vcs = load_vc_config(SHARED / "philly_vc_config.csv")
    trace = load_trace(SHARED / "reference_run/input_cluster_log_helios_format.csv.gz", "helios-log",
                       start="2017-10-01 00:00:00", end="2017-11-30 23:59:00", vcs=list(vcs))
    cluster = ClusterSpec.from_vc_sizes(vcs)
    for policy in policies:
        print(f"{policy}: {count(trace.jobs[:n], cluster, policy):,} bytecodes for {n:,} jobs")


if __name__ == "__main__":
    main()
