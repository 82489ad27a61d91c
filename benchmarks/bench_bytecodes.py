"""Python bytecodes executed by ``Simulator.run`` on the first N Philly jobs of the Helios reference
window (../shared): a deterministic measure of the kernel loop's work, for before/after comparisons
on a machine too loaded for timings. Run:
`python benchmarks/bench_bytecodes.py [N] [policy ...] [--baseline-src PATH]` (default 20000 jobs,
fifo sjf srtf horus). With ``--baseline-src`` (another tree's ``src`` folder, e.g. a checkout of
main) each count is printed beside the baseline's, measured in a child process on that source.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from dlsched.core.cluster import ClusterSpec
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.traces.api import load_trace
from dlsched.traces.vc import load_vc_config

SHARED = Path(__file__).resolve().parents[1].parent / "shared" / "traces" / "philly"


def traced(fn, *args):
    """``(fn(*args), bytecodes executed by the call)``: the counter every bytecode figure uses."""
    seen = [0]

    def local(frame, event, arg):
        if event == "opcode":
            seen[0] += 1
        return local

    def enter(frame, event, arg):
        frame.f_trace_opcodes = True
        return local

    sys.settrace(enter)
    try:
        out = fn(*args)
    finally:
        sys.settrace(None)
    return out, seen[0]


def count(jobs: list, cluster: ClusterSpec, policy: str) -> int:
    """Bytecodes executed while one run simulates ``jobs``."""
    sim = Simulator(cluster, make_policy(policy), SimConfig())
    return traced(sim.run, jobs)[1]


def counts(n: int, policies: list[str]) -> dict[str, int]:
    """Bytecodes per policy for the first ``n`` jobs, on the source this process imports."""
    vcs = load_vc_config(SHARED / "philly_vc_config.csv")
    trace = load_trace(SHARED / "reference_run/input_cluster_log_helios_format.csv.gz", "helios-log",
                       start="2017-10-01 00:00:00", end="2017-11-30 23:59:00", vcs=list(vcs))
    cluster = ClusterSpec.from_vc_sizes(vcs)
    return {policy: count(trace.jobs[:n], cluster, policy) for policy in policies}


def baseline_counts(src: Path, n: int, policies: list[str]) -> dict[str, int]:
    """The same counts measured by a child process that imports ``src`` instead of this tree."""
    env = {**os.environ, "PYTHONPATH": str(src)}
    out = subprocess.run([sys.executable, __file__, str(n), *policies, "--raw"], env=env,
                         check=True, capture_output=True, text=True).stdout
    return {name: int(value) for name, value in (line.split() for line in out.splitlines())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("n", nargs="?", type=int, default=20000, help="jobs to simulate")
    parser.add_argument("policies", nargs="*", default=["fifo", "sjf", "srtf", "horus"])
    parser.add_argument("--baseline-src", type=Path, help="another tree's src folder to compare with")
    parser.add_argument("--raw", action="store_true", help=argparse.SUPPRESS)  # the child's output
    args = parser.parse_args()
    if args.baseline_src is not None and not (args.baseline_src / "dlsched").is_dir():
        parser.exit(2, f"error: --baseline-src {args.baseline_src}: no dlsched package there\n")
    new = counts(args.n, args.policies)
    if args.raw:
        for policy, value in new.items():
            print(policy, value)
        return
    if args.baseline_src is None:
        for policy, value in new.items():
            print(f"{policy}: {value:,} bytecodes for {args.n:,} jobs")
        return
    old = baseline_counts(args.baseline_src.resolve(), args.n, args.policies)
    print(f"{'policy':8} {'baseline':>12} {'this tree':>12} {'change':>9}  ({args.n:,} jobs; baseline: "
          f"{args.baseline_src})")
    for policy, value in new.items():
        print(f"{policy:8} {old[policy]:>12,} {value:>12,} {(value - old[policy]) / old[policy]:>+9.2%}")


if __name__ == "__main__":
    main()
