"""One EASY pass beside a FIFO pass (and greedy backfill, and conservative) over the same queue, in one run.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_backfill.py [--nodes 1000] [--waiting 1000] [--rounds 5]

The state: ``--nodes`` 8-GPU nodes in one VC, each holding a 4-GPU job (4 GPUs free) that has
run for a while, with a time limit between 1 and 10 hours; the queue's head asks for 16 GPUs
(two whole nodes: it cannot start, so it is given a reservation at the second earliest end), and
``--waiting`` - 1 jobs of 1-4 GPUs follow, with limits of 10 minutes to 10 hours: EASY starts
those that end by the reservation or leave the head its room, and keeps the rest waiting. A pass
is one policy pass through the kernel's dispatcher on a fresh copy of that state, every policy
with ``estimate=limit``: ``fifo`` (stops at the head), ``fifo+greedy`` (``--backfill``: starts
whatever fits), ``easy`` and ``conservative``. Best and median of ``--rounds`` are printed with
the jobs each pass started (a shared machine drifts; the best is the fairer figure).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.decide import Collect, Decider
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sched.indexes import make_view

NOW = 1_000_000.0
VARIANTS = {"fifo": ("fifo", {}), "fifo+greedy": ("fifo", {"backfill": True}),
            "easy": ("easy", {"estimate": "limit"}), "conservative": ("conservative", {"estimate": "limit"})}


def build(variant: str, nodes: int, waiting: int, seed: int):
    """A fresh state, view and policy with the running and waiting jobs of the module docstring."""
    rng = random.Random(seed)
    name, options = VARIANTS[variant]
    policy = make_policy(name, **options)
    state = ClusterState(ClusterSpec.from_vc_sizes({"vc": nodes}, 8), new_queue=policy.new_queue)
    view = make_view(state, policy)
    policy.prepare(view)
    vc = state.vcs[0]
    for node in vc.nodes:
        began = NOW - rng.uniform(0, 1800.0)
        j = Job(f"r{node}", "vc", 4, began, 36_000.0, time_limit_s=rng.uniform(3600.0, 36_000.0))
        state.submit(j, began)
        state.start(j, ((node, 0x0F),), began)
    jobs = [Job("head", "vc", 16, NOW, 3600.0, time_limit_s=3600.0)]
    jobs += [Job(f"w{i}", "vc", rng.choice((1, 1, 2, 2, 4)), NOW, 600.0, time_limit_s=rng.uniform(600.0, 36_000.0))
             for i in range(waiting - 1)]
    for j in jobs:
        if policy.job_submitted is not None:
            policy.job_submitted(j, NOW)
        state.submit(j, NOW)
    view.now = NOW
    return policy, view, vc


def one_pass(variant: str, args, seed: int) -> tuple[float, int]:
    """Seconds of one pass carried out through the kernel's dispatcher; the jobs it started."""
    policy, view, vc = build(variant, args.nodes, args.waiting, seed)
    decider = Decider(view.state, view, policy, Collect(view.state))
    t0 = time.perf_counter()
    started = decider.collect_pass(vc, NOW)
    return time.perf_counter() - t0, len(started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=1000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results: dict[str, list[float]] = {name: [] for name in VARIANTS}
    made: dict[str, int] = {}
    for r in range(args.rounds):  # alternate, so drift hits every variant alike
        for name in VARIANTS:
            secs, n = one_pass(name, args, seed=r)
            results[name].append(secs)
            made[name] = n
    print(f"one pass, {args.waiting:,} waiting jobs (the head needs 16 GPUs) on {args.nodes:,} nodes "
          f"(4 free GPUs each), {args.rounds} rounds:")
    for name, times in results.items():
        print(f"  {name:<13} best {min(times) * 1e3:8.2f} ms   median {statistics.median(times) * 1e3:8.2f} ms   "
              f"({made[name]} jobs started)")
    for name in ("easy", "conservative"):
        print(f"  {name} / fifo+greedy (best): {min(results[name]) / min(results['fifo+greedy']):.2f}x")


if __name__ == "__main__":
    main()
