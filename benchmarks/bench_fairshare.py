"""One fair-share pass beside a FIFO pass over the same waiting queue, in the same run.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_fairshare.py [--nodes 1000] [--waiting 1000]
        [--users 200] [--rounds 5]

The state: ``--nodes`` 8-GPU nodes in one VC, half of each node's GPUs busy, ``--users`` users
with decayed usage from finished jobs, and ``--waiting`` jobs waiting (1-4 GPUs, so that one pass starts them all). A pass is one
policy pass carried out through the kernel's dispatcher on a fresh copy of that state: the fair-share
policy (``fairshare``: the user with the least time-decayed GPU usage first, FIFO within a user)
against FIFO (the baseline: same placement, same jobs, its queue order only). Best and median of
``--rounds`` are printed with the number of decisions each pass made (a shared machine drifts;
the best is the fairer figure).
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.kernel.decide import Collect, Decider
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sched.indexes import make_view

SIZES = (1, 1, 1, 1, 2, 2, 4, 8, 8, 16)
WAITING_SIZES = (1, 1, 2, 2, 4)   # each fits a node's 4 free GPUs: a pass starts every waiting job
NOW = 1_000_000.0


def build(policy_name: str, nodes: int, waiting: int, users: int, seed: int):
    """A fresh state, view and policy: every node holds a 4-GPU job (4 GPUs free); ``waiting`` jobs
    of 1-4 GPUs queue (fewer GPUs than are free: one pass starts every one of them)."""
    rng = random.Random(seed)
    policy = make_policy(policy_name)
    state = ClusterState(ClusterSpec.from_vc_sizes({"vc": nodes}, 8), new_queue=policy.new_queue)
    view = make_view(state, policy)
    policy.prepare(view)
    vc = state.vcs[0]
    t = NOW - 100_000.0
    for u in range(users):  # history: each user finished jobs of different sizes (decayed usage)
        j = Job(f"h{u}", "vc", rng.choice(SIZES[:8]), t, rng.uniform(600, 36_000), user=f"u{u}")
        on_submit = policy.job_submitted
        if on_submit is not None:
            on_submit(j, t)
        on_finish = policy.job_finished
        j.start_time, j.end_time = t, t + true_duration(j)
        if on_finish is not None:
            on_finish(j, t + rng.uniform(0, 90_000))
    for node in vc.nodes:
        j = Job(f"r{node}", "vc", 4, NOW - 10.0, 3600.0, user=f"u{rng.randrange(users)}")
        state.submit(j, NOW - 10.0)
        state.start(j, ((node, 0x0F),), NOW - 10.0)
    for i in range(waiting):
        j = Job(f"w{i}", "vc", rng.choice(WAITING_SIZES), NOW, rng.uniform(600, 36_000), user=f"u{rng.randrange(users)}")
        if policy.job_submitted is not None:
            policy.job_submitted(j, NOW)
        state.submit(j, NOW)
    view.now = NOW
    return policy, view, vc


def one_pass(policy_name: str, args, seed: int) -> tuple[float, int]:
    """Seconds of one pass carried out through the kernel's dispatcher; the jobs it started."""
    policy, view, vc = build(policy_name, args.nodes, args.waiting, args.users, seed)
    decider = Decider(view.state, view, policy, Collect(view.state))
    t0 = time.perf_counter()
    started = decider.collect_pass(vc, NOW)
    return time.perf_counter() - t0, len(started)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=1000)
    ap.add_argument("--users", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    results: dict[str, list[float]] = {"fifo": [], "fairshare": []}
    made: dict[str, int] = {}
    for r in range(args.rounds):  # alternate, so drift hits both alike
        for name in ("fifo", "fairshare"):
            secs, n = one_pass(name, args, seed=r)
            results[name].append(secs)
            made[name] = n
    print(f"one pass, {args.waiting:,} waiting jobs of {args.users} users on {args.nodes:,} nodes "
          f"(4 free GPUs each), {args.rounds} rounds:")
    for name, times in results.items():
        print(f"  {name:<10} best {min(times) * 1e3:8.2f} ms   median {statistics.median(times) * 1e3:8.2f} ms   "
              f"({made[name]} jobs started)")
    print(f"  fair share / FIFO (best): {min(results['fairshare']) / min(results['fifo']):.2f}x")


if __name__ == "__main__":
    main()
