"""GPU-sharing speed: one Horus round, and a whole simulation with sharing, each beside the same
work without sharing.

1. One Horus round (k-means over the pending queue, a weighted-fair pick of beta jobs, Eq. 7-10
   cost placement of each) with 1,000 pending jobs on 128 nodes x 8 GPUs, half of the GPUs
   already holding a job; beside it one FIFO pass (exclusive GPUs) over the same queue and
   cluster. Target (issue 10): <= 50 ms a round. Also printed: a whole Horus pass (every job
   tried, as the simulator runs it).
2. A simulation of N jobs (predicted resources) with sharing (``horus`` and ``fifo``, 2 jobs per
   GPU, time-sliced truth, delivered utilisation) beside FIFO without sharing and FIFO with
   backfill without sharing, each run in this process, and their ratios, on two workloads:

   * **built-in**: the synthetic generator at its default offered load 0.8. Its FIFO queue grows
     without bound (head-of-line blocking), so exclusive FIFO does O(1) work a pass while any
     policy that looks past the head (backfill, Horus) does O(queue): the goal there is sharing
     no slower than FIFO with backfill, the exclusive policy that does the same kind of scan.
   * **bounded**: the same generator at offered load 0.5 (``--bounded-load``). The queue stays
     short (the mean pending jobs per pass is printed beside it), so every policy does the same
     kind of work a pass and the ratio measures the cost of sharing itself. Goal: sharing within
     5x of FIFO exclusive.

   Issue 10's target: Horus with sharing on 100,000 built-in jobs <= 60 s (``--sim-jobs 100000``).

    OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_sharing.py [--repeat 5] [--sim-jobs 20000]
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.kernel.decide import apply as apply_decision
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.registry import make_policy
from dlsched.sched.indexes import make_view

NODES, GPUS, PENDING = 128, 8, 1000


def _job(i: int, rng: random.Random, t: float) -> Job:
    gpus = rng.choices([1, 2, 4, 8], [0.7, 0.15, 0.1, 0.05])[0]
    j = Job(f"j{i}", "all", gpus, t, 3600.0)
    j.pred_gpu_util = rng.uniform(10, 100)
    j.pred_gpu_mem_mib = rng.uniform(1000, 14000)
    return j


def _scene(policy, cap: int, seed: int = 0, step: int = 2) -> tuple[ClusterState, SchedulingView]:
    """128 x 8 V100s, every ``step``-th GPU holding a 1-GPU job (2: half, 1: all), 1,000 pending."""
    rng = random.Random(seed)
    cluster = ClusterSpec.from_vc_sizes({"all": NODES}, GPUS, gpu_type("V100"))
    state = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=cap)
    i = 0
    for node in range(NODES):
        for g in range(0, GPUS, step):
            j = _job(i, rng, 0.0)
            j.gpus = 1
            state.submit(j, 0.0)
            state.start(j, ((node, 1 << g),), 0.0)
            i += 1
    for k in range(PENDING):
        state.submit(_job(i + k, rng, float(k)), float(k))
    view = make_view(state, policy)   # the driver's step: declared indexes made
    view.now = float(PENDING)
    return state, view


def time_pass(name: str, cap: int, repeat: int, step: int = 2, **options) -> tuple[float, int]:
    """Median milliseconds of one pass (decisions applied), and the jobs it started."""
    times, started = [], 0
    for r in range(repeat):
        policy = make_policy(name, share=cap > 1, **options)
        state, view = _scene(policy, cap, seed=r, step=step)
        vc = state.vcs[0]
        t0 = time.perf_counter()
        n = 0
        for decision in policy.schedule(view, vc):
            apply_decision(state, decision, view.now)
            n += 1
        times.append((time.perf_counter() - t0) * 1000)
        started = n
    return statistics.median(times), started


def _predicted(jobs: list[Job]) -> None:
    """Predicted utilisation and memory (the shipped predictor), computed once per distinct
    (model, batch, sequence, AMP, optimizer) and copied: the same values, minutes less set-up."""
    from dlsched.cli.common import predict_resources

    groups: dict[tuple, list[Job]] = {}
    for j in jobs:
        key = (j.onnx_ref or j.model_name, j.batch_size, getattr(j, "seq_len", 0),
               getattr(j, "amp", False), getattr(j, "optimizer", ""))
        groups.setdefault(key, []).append(j)
    predict_resources([g[0] for g in groups.values()], "V100")
    for g in groups.values():
        for j in g[1:]:
            j.pred_gpu_util, j.pred_gpu_mem_mib = g[0].pred_gpu_util, g[0].pred_gpu_mem_mib


class _Backlog:
    """A kernel observer counting the pending jobs at every start (the queue a pass looks at)."""

    def __init__(self) -> None:
        self.state = None
        self.starts = self.pending = 0

    def attach(self, state) -> None:
        self.state = state

    def started(self, job: Job, vc, now: float) -> None:
        self.starts += 1
        self.pending += len(vc.queue)


def time_simulation(name: str, cap: int, jobs: int, delivered: bool = False, load: float = 0.8,
                    backfill: bool = False) -> tuple[float, float]:
    """Seconds to simulate the first ``jobs`` jobs of the synthetic workload at offered ``load``
    (predicted resources) with ``name``, and the mean pending jobs of a VC at a start: sharing
    (``cap`` > 1) runs the time-sliced truth, and with ``delivered`` also the delivered-utilisation
    observer, as ``dlsched simulate`` attaches it. CPU seconds of this process (the shared
    machine's other work does not count)."""
    from dlsched.metrics.delivered import DeliveredUtilisation
    from dlsched.models.speed import TimeSlicedSpeed
    from dlsched.runner import cluster_for
    from dlsched.sim import SimConfig, Simulator
    from dlsched.traces import synthetic

    tr = synthetic.generate(jobs=jobs, seed=0, load=load)
    cluster = cluster_for(tr.jobs, synthetic.default_cluster(tr)).with_gpu_type(gpu_type("V100"))
    _predicted(tr.jobs)
    backlog = _Backlog()
    observers = ((DeliveredUtilisation("gpu"),) if delivered else ()) + (backlog,)  # as simulate: the model's scope
    sim = Simulator(cluster, make_policy(name, share=cap > 1, backfill=backfill), SimConfig(max_jobs_per_gpu=cap),
                    speed_model=TimeSlicedSpeed() if cap > 1 else None, observers=observers)
    t0 = time.process_time()
    sim.run(tr.jobs)
    return time.process_time() - t0, backlog.pending / max(1, backlog.starts)


def simulations(jobs: int, load: float, what: str, policies: list[str], breakdown: bool = False) -> None:
    """One workload: FIFO exclusive, FIFO with backfill exclusive, then each policy with sharing,
    with the ratios to FIFO exclusive (and, for sharing, to FIFO with backfill); ``breakdown``:
    each policy again with sharing but no observer, and exclusive, to say where sharing's cost is."""
    plain, queue = time_simulation("fifo", 1, jobs, load=load)
    backfill, bqueue = time_simulation("fifo", 1, jobs, load=load, backfill=True)
    print(f"{what} (offered load {load}), {jobs:,} jobs, CPU seconds of the simulation:")
    print(f"  fifo exclusive                 {plain:7.1f} s   (mean pending at a start {queue:8.1f})")
    print(f"  fifo+backfill exclusive        {backfill:7.1f} s   (mean pending at a start {bqueue:8.1f})   "
          f"{backfill / plain:5.1f}x fifo exclusive")
    for name in policies:
        share, squeue = time_simulation(name, 2, jobs, delivered=True, load=load)
        print(f"  {name + ' sharing (2 per GPU)':30s} {share:7.1f} s   (mean pending at a start {squeue:8.1f})   "
              f"{share / plain:5.1f}x fifo exclusive, {share / backfill:5.2f}x fifo+backfill")
    if breakdown:
        # where a sharing run's cost goes: the same policy without the observer, and exclusive
        for name in policies:
            bare, _ = time_simulation(name, 2, jobs, delivered=False, load=load)
            alone, aqueue = time_simulation(name, 1, jobs, load=load)
            print(f"    {name} sharing without the delivered-utilisation observer {bare:6.1f} s "
                  f"({bare / plain:4.1f}x fifo exclusive); {name} exclusive {alone:6.1f} s "
                  f"({alone / plain:4.1f}x, mean pending at a start {aqueue:.1f})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--sim-jobs", type=int, default=20000, help="jobs of the whole-simulation benchmark (0: skip)")
    ap.add_argument("--sim-policies", default="horus,fifo",
                    help="policies simulated with sharing, comma-separated (default horus,fifo)")
    ap.add_argument("--bounded-load", type=float, default=0.5,
                    help="offered load of the bounded workload (default 0.5; 0: skip it)")
    ap.add_argument("--builtin", action=argparse.BooleanOptionalAction, default=True,
                    help="simulate the built-in workload (load 0.8) too (default on)")
    ap.add_argument("--breakdown", action="store_true",
                    help="also each sharing policy without the observer, and exclusive (where the cost goes)")
    args = ap.parse_args()
    for step, what in ((2, "half the GPUs busy"), (1, "every GPU busy: all by sharing")):
        for k in (1, 3):
            ms, n = time_pass("horus", 2, args.repeat, step, k=k, beta=15, rounds=1)
            print(f"one Horus round (k={k}, beta=15), {PENDING} pending, {NODES}x{GPUS} GPUs, {what}: {ms:7.1f} ms "
                  f"({n} started)   target <= 50 ms")
    ms, n = time_pass("horus", 2, args.repeat, k=3, beta=15)
    print(f"whole Horus pass (k=3, every job tried):                      {ms:7.1f} ms ({n} started)")
    ms, n = time_pass("fifo", 1, args.repeat)
    print(f"FIFO pass without sharing, same queue and cluster:            {ms:7.1f} ms ({n} started)")
    if args.sim_jobs:
        policies = args.sim_policies.split(",")
        if args.builtin:
            simulations(args.sim_jobs, 0.8, "built-in workload", policies, args.breakdown)
            print("  goal: sharing no slower than fifo+backfill; issue 10: horus (100,000 jobs) <= 60 s")
        if args.bounded_load > 0:
            simulations(args.sim_jobs, args.bounded_load, "bounded workload", policies, args.breakdown)
            print("  goal: sharing within 5x of fifo exclusive")
    print(f"(load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())})")

if __name__ == "__main__":
    main()
