"""The paper's experiments (Sec. 5) on the main engine: the Table-1 prototype and the scenarios,
each under the four policies, written as ``summary.json`` and ``timeline.csv``.

Each policy is an ordering policy plus a placement from the registry, run by the main
:class:`~dlsched.sim.engine.Simulator` with the topology speed model as ground truth:

* FCFS: strict FIFO (the head blocks), first node with room, lowest GPU ids;
* Best-Fit: FIFO scanning the whole queue (backfill), socket-aware best fit;
* TOPO-AWARE / TOPO-AWARE-P: FIFO scanning the whole queue (Alg. 1), topology placement.
"""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.experiments.topology.audit import PlacementAudit, PostponeCounter
from dlsched.experiments.topology.figures import summarize, timeline_rows
from dlsched.experiments.topology.scenarios import generate_jobs, prototype_jobs
from dlsched.run.config import RunConfig
from dlsched.sim.engine import SimResult
from dlsched.topology.graph import PRESET_GPUS
from dlsched.topology.jobgraph import JobProfile

# experiment policy -> (ordering policy, placement, backfill), all names of the registry
PAPER_POLICIES: dict[str, tuple[str, str, bool]] = {
    "fcfs": ("fifo", "first-fit-node", False),
    "best-fit": ("fifo", "socket-best-fit", True),
    "topo-aware": ("fifo", "topo-aware", True),
    "topo-aware-p": ("fifo", "topo-aware-p", True),
}
POLICIES = tuple(PAPER_POLICIES)
VC = "all"


def paper_jobs(profiles: Sequence[JobProfile]) -> list[Job]:
    """Kernel jobs for the paper's profiles (the solo time is the true duration)."""
    return [Job(p.job_id, VC, p.gpus, p.arrival, p.solo_time, model_name=p.model, batch_size=p.batch_size,
                min_utility=p.min_utility) for p in profiles]


def paper_cluster(machines: int, preset: str) -> ClusterSpec:
    if preset not in PRESET_GPUS:
        raise ValueError(f"unknown topology preset {preset!r}; choose from {', '.join(PRESET_GPUS)}")
    return ClusterSpec.from_vc_sizes({VC: machines}, PRESET_GPUS[preset], topology=preset)


@dataclass(slots=True)
class PolicyRun:
    """One experiment policy simulated: its jobs (with outcomes) and what the audit recorded."""

    name: str
    jobs: list[Job]
    result: SimResult
    audit: PlacementAudit
    postponed: dict[str, int]
    seconds: float


def paper_config(name: str, machines: int, preset: str) -> RunConfig:
    """Experiment policy ``name`` on ``machines`` nodes of topology ``preset`` as a run: what
    ``dlsched simulate --nodes M --gpus-per-node G --topology PRESET --policy fifo --placement P
    [--backfill] --speed-model topology`` describes (the jobs are the experiment's own)."""
    from dlsched.run import ClusterConfig, ModelsConfig, PlacementConfig, PolicyConfig

    try:
        order, placement, backfill = PAPER_POLICIES[name]
    except KeyError:
        raise ValueError(f"unknown policy {name!r}; choose from {', '.join(PAPER_POLICIES)}") from None
    if preset not in PRESET_GPUS:
        raise ValueError(f"unknown topology preset {preset!r}; choose from {', '.join(PRESET_GPUS)}")
    return RunConfig(cluster=ClusterConfig(nodes=machines, gpus_per_node=PRESET_GPUS[preset], topology=preset),
                     policy=PolicyConfig(order, backfill=backfill), placement=PlacementConfig(placement),
                     models=ModelsConfig(speed="topology"))


def run_policy(name: str, jobs: list[Job], machines: int, preset: str) -> PolicyRun:
    """Simulate one experiment policy on the main engine with the topology speed model."""
    from dlsched.run import Inputs, build_run

    cluster = paper_cluster(machines, preset)
    run = build_run(paper_config(name, machines, preset), inputs=Inputs(jobs, cluster, None, "paper jobs", "V100"))
    audit = PlacementAudit()
    engine = run.engine(observers=(audit,))
    # the experiment counts each job's postponements: the run's own policy, wrapped
    policy = engine.simulator.policy = PostponeCounter(engine.simulator.policy)
    t0 = time.perf_counter()
    result = engine.simulator.run(jobs)
    return PolicyRun(name, jobs, result, audit, policy.counts, time.perf_counter() - t0)


def run_experiment(name: str, profiles: Sequence[JobProfile], machines: int, preset: str, out: Path,
                   policies: Sequence[str] = POLICIES, extra: dict | None = None) -> dict:
    """Simulate each policy; ``summary.json`` maps policy -> figures, plus a ``meta`` entry."""
    out.mkdir(parents=True, exist_ok=True)
    slo = {p.job_id: p.slo_slowdown for p in profiles}
    summary: dict = {}
    rows: list[dict] = []
    for pol in policies:
        run = run_policy(pol, paper_jobs(profiles), machines, preset)
        s = summarize(run.jobs, run.audit, run.result.extra["postponements"], slo)
        s["sim_seconds"] = round(run.seconds, 3)
        summary[pol] = s
        rows.extend(timeline_rows(pol, run.jobs, run.audit, run.postponed))
    meta = {"experiment": name, "machines": machines, "preset": preset, "jobs": len(profiles),
            "engine": "dlsched.sim (main engine), speed model: topology",
            "policies": {p: dict(zip(("order", "placement", "backfill"), PAPER_POLICIES[p])) for p in policies},
            "cumulative_time_definition": "sum over jobs of execution time (end - start)",
            "slowdown_definition": "mean over jobs of execution time / solo time on the best placement"}
    if "topo-aware-p" in summary:
        ref = summary["topo-aware-p"]["cumulative_time"]
        meta["speedup_of_topo_aware_p"] = {p: round(summary[p]["cumulative_time"] / ref, 4)
                                           for p in summary if p != "topo-aware-p"}
    meta.update(extra or {})
    summary["meta"] = meta
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "timeline.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return summary


def prototype(out: Path) -> dict:
    """Table 1's six jobs on one Minsky (Sec. 5.2, Fig. 8)."""
    return run_experiment("topo-prototype", prototype_jobs(), 1, "minsky", out)


def scenario(name: str, jobs: int, machines: int, out: Path, seed: int = 0,
             rate_per_min: float | None = None, preset: str = "minsky") -> dict:
    """Sec. 5.5 scenarios. The arrival rate defaults to 10 jobs/min per 5 machines (scenario 1's
    load), so scenario 2 keeps the same per-machine load instead of idling 1,000 machines."""
    if jobs < 1 or machines < 1:
        raise ValueError(f"--jobs and --machines must be >= 1, got {jobs} and {machines}")
    rate = rate_per_min if rate_per_min is not None else 10.0 * machines / 5.0
    wl = generate_jobs(jobs, rate, seed)
    return run_experiment(name, wl, machines, preset, out, extra={"rate_per_min": rate, "seed": seed})
