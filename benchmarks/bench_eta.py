"""One ETA refresh (forward simulation of the whole queue) beside a plain simulation of the same jobs.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_eta.py [--nodes 1000] [--waiting 1000] [--vcs 1]
        [--policy fifo|qssf] [--rounds 5] [--json]

The state: ``--nodes`` nodes of 8 GPUs in ``--vcs`` VCs, every GPU busy with running jobs (1-16
GPUs, predicted durations 10 min - 10 h, started at random times in the past) and ``--waiting``
jobs waiting (the same size mix). The refresh is :meth:`dlsched.sim.eta.EtaEstimator.estimate`:
copy the state, then run the policy forward until every waiting job has started. The baseline is
a plain :class:`~dlsched.sim.engine.Simulator` run of the same jobs (running and waiting ones all
submitted at once, durations = the predictions) on the same cluster: the same amount of
scheduling work through the engine. Best and median of ``--rounds`` are printed (a shared machine
drifts; the best is the fairer figure).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import time

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sim.engine import Simulator
from dlsched.sim.eta import EtaEstimator

SIZES = (1, 1, 1, 1, 2, 2, 4, 8, 8, 16)
NOW = 100_000.0


def make_jobs(n: int, vcs: list[str], rng: random.Random, prefix: str) -> list[Job]:
    jobs = []
    for i in range(n):
        dur = rng.uniform(600, 36_000)
        j = Job(f"{prefix}{i}", vcs[i % len(vcs)], rng.choice(SIZES), NOW - rng.uniform(0, 50_000), dur)
        j.pred_duration = dur
        j.priority = dur * j.gpus
        jobs.append(j)
    return jobs


def build(nodes: int, waiting: int, n_vcs: int, policy, seed: int) -> tuple[ClusterState, list[Job]]:
    """A full cluster (every GPU that a job fits busy) and ``waiting`` queued jobs."""
    rng = random.Random(seed)
    names = [f"vc{i}" for i in range(n_vcs)]
    per = {v: nodes // n_vcs + (1 if i < nodes % n_vcs else 0) for i, v in enumerate(names)}
    state = ClusterState(ClusterSpec.from_vc_sizes(per, 8), new_queue=policy.new_queue)
    running: list[Job] = []
    k = 0
    for vc in state.vcs:  # fill node by node with 1-8 GPU jobs until every GPU is taken
        for node in vc.nodes:
            free = 8
            while free:
                g = min(free, rng.choice((1, 1, 2, 4, 8)))
                dur = rng.uniform(600, 36_000)
                j = Job(f"r{k}", vc.name, g, NOW - rng.uniform(0, dur), dur)
                j.pred_duration, j.priority = dur, dur * g
                k += 1
                state.submit(j, j.submit_time if not running else max(j.submit_time, running[-1].submit_time))
                mask = ((1 << g) - 1) << (8 - free)
                state.start(j, ((node, mask),), max(j.submit_time, state.t_last))
                j.run_since = NOW - rng.uniform(0, dur)
                running.append(j)
                free -= g
    waiting_jobs = make_jobs(waiting, names, rng, "w")
    for j in sorted(waiting_jobs, key=lambda j: j.submit_time):
        state.submit(j, max(j.submit_time, state.t_last))
    return state, running + waiting_jobs


def plain_simulation(state: ClusterState, jobs: list[Job], policy_name: str) -> float:
    """Seconds of a Simulator run over copies of the same jobs (all submitted at NOW)."""
    spec = ClusterSpec(list(state.node_specs), {vc.name: state.cluster.vcs[vc.name] for vc in state.vcs})
    copies = []
    for j in jobs:
        c = Job(j.job_id, j.vc, j.gpus, NOW, j.pred_duration)
        c.pred_duration, c.priority = j.pred_duration, j.priority
        copies.append(c)
    policy = make_policy(policy_name, priorities={c.job_id: c.pred_duration for c in copies}) \
        if policy_name == "qssf" else make_policy(policy_name)
    t0 = time.perf_counter()
    Simulator(spec, policy).run(copies)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--waiting", type=int, default=1000)
    ap.add_argument("--vcs", type=int, default=1)
    ap.add_argument("--policy", default="fifo", choices=("fifo", "qssf"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    for opt in ("nodes", "waiting", "vcs", "rounds"):
        if getattr(a, opt) < 1 or getattr(a, opt) > 100_000:
            ap.error(f"--{opt} must be between 1 and 100000")
    if a.vcs > a.nodes:
        ap.error("--vcs must not exceed --nodes")
    policy = make_policy(a.policy, priorities={}) if a.policy == "qssf" else make_policy(a.policy)
    state, jobs = build(a.nodes, a.waiting, a.vcs, policy, a.seed)
    est = EtaEstimator(policy)
    refresh, plain = [], []
    result = None
    for _ in range(a.rounds):
        t0 = time.perf_counter()
        result = est.estimate(state, NOW)
        refresh.append(time.perf_counter() - t0)
        plain.append(plain_simulation(state, jobs, a.policy))
    state.check_invariants()  # the refreshes left the state as it was
    out = {"nodes": a.nodes, "gpus": 8 * a.nodes, "vcs": a.vcs, "policy": a.policy, "running": state.n_running,
           "waiting": state.n_pending, "starts_simulated": result.starts, "finishes_simulated": result.events,
           "refresh_best_ms": 1000 * min(refresh), "refresh_median_ms": 1000 * statistics.median(refresh),
           "plain_sim_best_ms": 1000 * min(plain), "plain_sim_median_ms": 1000 * statistics.median(plain),
           "rounds": a.rounds}
    if a.json:
        print(json.dumps(out, indent=2))
        return
    print(f"{a.policy}: {out['nodes']} nodes / {out['gpus']} GPUs in {a.vcs} VC(s), {out['running']} running, "
          f"{out['waiting']} waiting")
    print(f"  ETA refresh (copy + forward run to the last start: {result.starts} starts, {result.events} finishes): "
          f"best {out['refresh_best_ms']:.1f} ms, median {out['refresh_median_ms']:.1f} ms")
    print(f"  plain simulation of the same {len(jobs)} jobs (baseline):               "
          f"best {out['plain_sim_best_ms']:.1f} ms, median {out['plain_sim_median_ms']:.1f} ms")


if __name__ == "__main__":
    main()
