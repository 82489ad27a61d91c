"""Simulation time per job of every shipped policy as the trace and the cluster grow, beside FIFO
in the same run (issue 38 point 1: each policy's time per job should grow by at most 1.5x from 10 k
to 1 M jobs and from 100 to 10 k nodes, and stay within 3x of FIFO's).

Two sweeps on the built-in synthetic workload (``dlsched.traces.synthetic``: its default VC mix
scaled to the node count, arrivals spread so the offered GPU load is ``--load``, so a bigger
cluster gets proportionally more work per second and the same congestion):

* jobs: ``--jobs`` sizes on ``--base-nodes`` nodes;
* nodes: ``--nodes`` sizes with ``--base-jobs`` jobs.

The time is the CPU time of the simulation alone (``Simulator.run``; the trace is generated and the
policy built before the clock starts), once per size: CPU rather than wall time, so that other work
on a shared machine does not count. Horus runs as ``dlsched simulate --policy horus`` does:
2 jobs per GPU, the time-sliced truth, predicted utilisation and memory. ``--general`` also runs
SRTF and SRTF-pred on their general path (a full sort per pass), the before of the incremental cut.
Each run also prints (stderr) the mean pending and running jobs over the run and the preemptions per
job: what a ranking policy looks at per pass, which grows with a longer trace even at a fixed load
(the workload's heavy-tailed durations take weeks of arrivals to fill the cluster).

A policy whose run at one size takes longer than ``--budget`` seconds is not run at the larger
sizes of that sweep (printed as ``skip``). Run small: ``--max-jobs 100000 --max-nodes 1000``.

    .venv/bin/python benchmarks/bench_policy_scale.py --max-jobs 100000 --max-nodes 1000
"""

from __future__ import annotations

import argparse
import contextlib
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "benchmarks"))

POLICIES = ("fifo", "sjf", "srtf", "srtf-pred", "qssf", "las", "fairshare", "horus")
GENERAL = ("srtf", "srtf-pred")  # the policies with a general path to compare (--general)


def cluster_of(nodes: int) -> dict[str, int]:
    """The synthetic default VC mix scaled to ``nodes`` nodes (every VC at least one node)."""
    from dlsched.traces.synthetic import DEFAULT_CLUSTER

    total = sum(DEFAULT_CLUSTER.values())
    return {vc: max(1, round(n * nodes / total)) for vc, n in DEFAULT_CLUSTER.items()}


def workload(jobs: int, nodes: int, load: float, seed: int):
    """(jobs, cluster spec) of the synthetic workload for ``nodes`` nodes."""
    from dlsched.runner import cluster_for
    from dlsched.traces import synthetic

    vcs = cluster_of(nodes)
    trace = synthetic.generate(jobs=jobs, seed=seed, vcs=vcs, load=load)
    for job in trace.jobs:  # keep every job placeable on its VC
        job.gpus = min(job.gpus, vcs[job.vc] * 8)
    return trace, cluster_for(trace.jobs, vcs)


def simulate(policy: str, trace, cluster, general: bool = False) -> float:
    """CPU seconds of simulation of ``trace`` under ``policy`` (``general``: SRTF's full sort per pass)."""
    from dlsched.core.cluster import gpu_type
    from dlsched.models.speed import TimeSlicedSpeed
    from dlsched.registry import make_policy
    from dlsched.sched.policies.srtf import SrtfPolicy
    from dlsched.sim import SimConfig, Simulator

    sharing = policy == "horus"
    options: dict = {"origin": trace.origin} if policy in ("qssf", "srtf-pred") else {}
    if sharing:
        from bench_sharing import _predicted

        _predicted(trace.jobs)
        cluster = cluster.with_gpu_type(gpu_type("V100"))
    SrtfPolicy.incremental = not general
    try:
        pol = make_policy(policy, share=sharing, **options)
        sim = Simulator(cluster, pol, SimConfig(max_jobs_per_gpu=2 if sharing else 1),
                        speed_model=TimeSlicedSpeed() if sharing else None)
        t0 = time.process_time()
        result = sim.run(trace.jobs)
        seconds = time.process_time() - t0
        print(f"    {policy}: {work_line(result, trace.jobs)}", file=sys.stderr, flush=True)
        est = getattr(pol, "estimator", None)
        if est is not None and hasattr(est, "refit_seconds"):  # where an estimator's time goes
            print(f"    {policy}: {est.n_fits} GBDT refits trained ({est.n_refits} due) in "
                  f"{est.refit_cpu_seconds:.1f} s of CPU ({est.refit_seconds:.1f} s wall), "
                  f"{est.refit_cpu_seconds / seconds:.0%} of the simulation's CPU time",
                  file=sys.stderr, flush=True)
        return seconds
    finally:
        SrtfPolicy.incremental = True


def work_line(result, jobs) -> str:
    """What the policy had to look at, which grows with a long trace even at a fixed load: the
    time-weighted mean of the pending and running jobs (the cluster's, from the run's timeline)
    and the preemptions per job. A policy that ranks the queue or the running jobs at a pass pays
    in proportion to these, so a per-job cost that grows with them is the workload's, not a
    per-event cost that grows."""
    import numpy as np

    tl = result.metrics.timeline_arrays()
    t = tl["time"]
    if len(t) < 2 or t[-1] <= t[0]:
        return "timeline too short to weigh"
    dt = np.diff(t)
    span = t[-1] - t[0]
    queued = float(np.dot(tl["queued_jobs"][:-1], dt) / span)
    running = float(np.dot(tl["running_jobs"][:-1], dt) / span)
    preempted = sum(j.preemptions for j in jobs) / max(1, len(jobs))
    return (f"mean {queued:,.1f} pending and {running:,.1f} running jobs over {span / 86400:,.1f} days, "
            f"{preempted:.2f} preemptions per job")


def sweep(label: str, sizes: list[tuple[int, int]], names: list[str], args) -> None:
    """One table: a row per policy, a column per (jobs, nodes) size, us per job (x FIFO's)."""
    heads = [f"{j // 1000}k jobs/{n} nodes" for j, n in sizes]
    print(f"\n{label}: CPU microseconds of simulation per job (x FIFO's at the same size)")
    print(f"  {'policy':16s}" + "".join(f"{h:>26s}" for h in heads) + f"{'growth':>9s}")
    fifo: dict[tuple[int, int], float] = {}
    rows: dict[str, list[str]] = {name: [] for name in names}
    spent: dict[str, float] = {}
    per_job: dict[str, list[float]] = {name: [] for name in names}
    for size in sizes:
        jobs, nodes = size
        trace, cluster = workload(jobs, nodes, args.load, args.seed)
        for name in names:
            policy, general = (name[:-len(" (general)")], True) if name.endswith(" (general)") else (name, False)
            if spent.get(name, 0.0) > args.budget:
                rows[name].append("skip")
                continue
            seconds = simulate(policy, trace, cluster, general)
            spent[name] = seconds
            us = seconds / jobs * 1e6
            per_job[name].append(us)
            if name == "fifo":
                fifo[size] = us
            ratio = f" ({us / fifo[size]:.1f}x)" if size in fifo else ""
            rows[name].append(f"{us:,.1f}{ratio}")
            print(f"    {name} at {jobs:,} jobs / {nodes:,} nodes: {seconds:.2f} s", file=sys.stderr, flush=True)
    for name in names:
        done = per_job[name]
        growth = f"{done[-1] / done[0]:.2f}x" if len(done) > 1 else "-"
        print(f"  {name:16s}" + "".join(f"{c:>26s}" for c in rows[name]) + f"{growth:>9s}")


def sizes_list(text: str, flag: str, cap: int) -> list[int]:
    try:
        values = [int(float(v)) for v in text.split(",") if v.strip()]
    except ValueError:
        raise ValueError(f"{flag} takes comma-separated whole numbers, got {text!r}") from None
    if values and min(values) < 1:
        raise ValueError(f"{flag} needs sizes >= 1, got {text!r}")
    kept = [v for v in values if v <= cap]
    if len(kept) < len(values):
        print(f"note: {flag}: sizes above {cap:,} left out ({', '.join(f'{v:,}' for v in values if v > cap)})",
              file=sys.stderr)
    return kept


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", default="10000,100000,1000000", help="jobs sweep sizes (comma-separated; empty: no jobs sweep)")
    ap.add_argument("--nodes", default="100,1000,10000", help="nodes sweep sizes (comma-separated; empty: no nodes sweep)")
    ap.add_argument("--base-nodes", type=int, default=100, help="nodes of the jobs sweep")
    ap.add_argument("--base-jobs", type=int, default=100000, help="jobs of the nodes sweep")
    ap.add_argument("--max-jobs", type=int, default=10**9, help="leave out larger job counts")
    ap.add_argument("--max-nodes", type=int, default=10**9, help="leave out larger node counts")
    ap.add_argument("--policies", default=",".join(POLICIES), help="policies (FIFO always runs first)")
    ap.add_argument("--general", action="store_true", help="also SRTF/SRTF-pred's full sort per pass")
    ap.add_argument("--budget", type=float, default=120.0,
                    help="seconds: a policy slower than this at one size skips the larger ones")
    ap.add_argument("--load", type=float, default=0.8, help="offered GPU load of the workload")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    from dlsched.registry import POLICIES as KNOWN

    names = [p.strip() for p in args.policies.split(",") if p.strip()]
    unknown = [p for p in names if p not in KNOWN]
    if unknown:
        print(f"error: --policies: unknown policy {unknown[0]!r} (known: {', '.join(POLICIES)})", file=sys.stderr)
        return 2
    if args.base_nodes < 1 or args.base_jobs < 1 or not args.budget > 0 or not 0 < args.load <= 10:
        print("error: --base-nodes and --base-jobs must be >= 1, --budget > 0, --load in (0, 10]", file=sys.stderr)
        return 2
    names = ["fifo", *[p for p in names if p != "fifo"]]
    with contextlib.suppress(ImportError):  # imported before any clock starts: the first refit would pay otherwise
        import lightgbm  # noqa: F401
    if args.general:
        names += [f"{p} (general)" for p in GENERAL if p in names]
    try:
        jobs = sizes_list(args.jobs, "--jobs", args.max_jobs)
        nodes = sizes_list(args.nodes, "--nodes", args.max_nodes)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    base_jobs = min(args.base_jobs, args.max_jobs)
    print(f"synthetic workload, offered load {args.load:g}, seed {args.seed}; simulation only, one run per size")
    if jobs:
        sweep(f"jobs sweep on {args.base_nodes} nodes", [(j, args.base_nodes) for j in jobs], names, args)
    if nodes:
        sweep(f"nodes sweep with {base_jobs:,} jobs", [(base_jobs, n) for n in nodes], names, args)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
