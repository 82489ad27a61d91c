"""Library entry points behind ``dlsched simulate`` / ``compare`` / ``demo``.

They turn a loaded trace plus cluster sizes into run directories. ``compare_policies`` runs
policies in parallel processes (fork: children share the loaded jobs copy-on-write).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import (
    default_speed_model,
    make_energy_controller,
    make_failure_model,
    make_policy,
    make_speed_model,
)
from dlsched.sim.config import SimConfig
from dlsched.sim.engine import Simulator
from dlsched.sim.results import write_run

if TYPE_CHECKING:
    import pandas as pd

SUMMARY_KEYS = ("jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct", "avg_queue_delay", "median_queue_delay",
                "p95_queue_delay", "p99_queue_delay", "queued_jobs", "makespan", "gpu_utilization", "preemptions")


@dataclass(slots=True)
class RunSpec:
    """What to simulate: policy, placement and their options, engine configuration."""

    policy: str = "fifo"
    placement: str | None = None        # None: the policy's default_placement, else consolidate
    backfill: bool = False
    config: SimConfig = field(default_factory=SimConfig)
    policy_options: dict = field(default_factory=dict)
    meta: dict = field(default_factory=dict)
    energy: str | None = None            # None or a name in ENERGY_CONTROLLERS ("ces", "vanilla")
    energy_options: dict = field(default_factory=dict)
    origin: object = None                # the trace's wall-clock origin (for calendar features)
    speed_model: str | None = None       # ground truth: a name in dlsched.registry.SPEED_MODELS; None: the
                                         # placement's / cluster's default (registry.default_speed_model)
    failure_model: str = "none"          # ground truth: a name in dlsched.registry.FAILURE_MODELS
    failure_options: dict = field(default_factory=dict)
    speed_options: dict = field(default_factory=dict)  # e.g. {"profiles": DIR} for the colocation model
    observe_after: float | None = None   # seconds of running after which observed utilisation and memory
                                         # replace a job's predictions (dlsched.sim.observe); None: never


def cluster_for(jobs: list[Job], vc_nodes: dict[str, int] | None = None, nodes: int | None = None,
                gpus_per_node: int = 8, topology: str | None = None) -> ClusterSpec:
    """Cluster from a VC-size table, or one shared pool of ``nodes`` nodes.

    With a pool, every job is moved to the single VC ``all`` (their own VC is kept in the
    output records only through ``jobs.csv`` of the input). Without either, a clear error.
    """
    if vc_nodes:
        return ClusterSpec.from_vc_sizes(vc_nodes, gpus_per_node, topology=topology)
    if nodes:
        for job in jobs:
            job.vc = "all"
        return ClusterSpec.from_vc_sizes({"all": nodes}, gpus_per_node, topology=topology)
    raise ValueError("the cluster size is unknown: give --vc-config FILE (VC sizes) or --nodes N (one shared pool)")


def keep_cluster_vcs(jobs: list[Job], cluster: ClusterSpec) -> tuple[list[Job], dict[str, int]]:
    """Jobs whose VC exists in the cluster (``jobs`` itself when all do), plus counts of those left
    out by VC (reported)."""
    vcs = cluster.vcs
    if all(map(vcs.__contains__, map(attrgetter("vc"), jobs))):
        return jobs, {}  # every VC exists: the list itself (a copy of 1M jobs is 8 MB more at the peak)
    kept, left = [], {}
    for job in jobs:
        if job.vc in vcs:
            kept.append(job)
        else:
            left[job.vc] = left.get(job.vc, 0) + 1
    return kept, left


@dataclass(slots=True)
class Engine:
    """A run's simulator with the parts the summary reads back (observers, power manager)."""

    simulator: Simulator
    observers: tuple
    power: object = None


def make_run_policy(spec: RunSpec):
    """The policy object ``spec`` describes (its options, backfill, GPU sharing)."""
    options = dict(spec.policy_options)
    if spec.backfill:
        options["backfill"] = True
    if spec.config.max_jobs_per_gpu > 1:
        options["share"] = True
    return make_policy(spec.policy, spec.placement, **options)


def assemble(jobs: list[Job], cluster: ClusterSpec, spec: RunSpec, observers: tuple = (),
             policy=None) -> Engine:
    """The simulator ``spec`` describes: the policy (checked against the jobs), power, ground
    truth and observers. ``observers``: the caller's own kernel observers (e.g. replay's start
    log, a harness's audit), run after the ones the spec asks for. ``policy``: the object
    :func:`make_run_policy` made for ``spec``, for an observer that must hold it before the
    simulator exists (the ETA experiment's estimator); None: made here."""
    if policy is None:
        policy = make_run_policy(spec)
    validate = getattr(policy, "validate_trace", None)
    if validate is not None:
        validate(jobs)
    power = make_power_manager(spec, cluster) if spec.energy else None
    speed = spec.speed_model if spec.speed_model is not None else default_speed_model(policy.placer, cluster)
    speed_model = make_speed_model(speed, cluster, **(spec.speed_options if speed == spec.speed_model else {}))
    scope = "gpu" if speed_model is None else getattr(speed_model, "scope", "node")  # no model: no rate moves
    observers = run_observers(spec, speed_model is not None, scope) + tuple(observers)
    sim = Simulator(cluster, policy, spec.config, power_manager=power, speed_model=speed_model,
                    failure_model=make_failure_model(spec.failure_model, **spec.failure_options),
                    observers=observers)
    return Engine(sim, observers, power)


def run_one(jobs: list[Job], cluster: ClusterSpec, spec: RunSpec, out_dir: str | Path,
            progress: Callable[[int, int], None] | None = None, observers: tuple = ()) -> dict:
    """Simulate one policy and write its run directory; returns the summary. ``observers``: the
    caller's own kernel observers (e.g. replay's start log), each with ``summary(metrics)``."""
    engine = assemble(jobs, cluster, spec, observers)
    observers, power = engine.observers, engine.power
    result = engine.simulator.run(jobs, progress=progress)
    for obs in observers:
        result.extra.update(obs.summary(result.metrics))
    if power is not None:
        from dlsched.energy.accounting import EnergyModel

        model = EnergyModel(idle_power_w=spec.energy_options.get("idle_power_w", 800.0))
        result.extra["energy"] = power.summary(result.metrics, model)
    book = getattr(engine.simulator.policy, "book", None)   # a reserving policy's (easy, conservative)
    if book is not None:
        result.extra["reservations"] = engine.simulator.policy.summary()
    meta = {"compat": spec.config.compat, "backfill": spec.backfill, **spec.meta}
    if spec.config.max_jobs_per_gpu > 1:
        meta["max_jobs_per_gpu"] = spec.config.max_jobs_per_gpu
    summary = write_run(result, out_dir, meta)
    if book is not None:
        book.write(Path(out_dir) / "reservations.csv")
    return summary


def run_observers(spec: RunSpec, has_speed_model: bool, scope: str = "node") -> tuple:
    """The kernel observers a run asks for, each with ``summary(metrics) -> dict`` merged into
    summary.json: delivered utilisation with GPU sharing or a speed model (``scope``: the speed
    model's, whose rates a start or stop moves), prediction correction with ``observe_after``.
    None otherwise: a plain run pays nothing."""
    observers: list = []
    if has_speed_model or spec.config.max_jobs_per_gpu > 1:
        from dlsched.metrics.delivered import DeliveredUtilisation

        observers.append(DeliveredUtilisation(scope))
    if spec.observe_after is not None:
        from dlsched.sim.observe import ObservedCorrection

        observers.append(ObservedCorrection(spec.observe_after))
    return tuple(observers)


def make_power_manager(spec: RunSpec, cluster: ClusterSpec):
    """The energy-saving controller named by ``spec.energy`` (see the registry), wrapped for the engine."""
    return make_energy_controller(spec.energy, len(cluster.nodes), spec.energy_options, spec.origin)


_FORK_STATE: dict = {}


def _child(args: tuple[str, Path]) -> dict:
    name, out = args
    jobs, cluster, base = _FORK_STATE["jobs"], _FORK_STATE["cluster"], _FORK_STATE["spec"]
    spec = RunSpec(name, base.placement, base.backfill, base.config, dict(base.policy_options.get(name, {})),
                   base.meta, base.energy, base.energy_options, base.origin, base.speed_model, base.failure_model,
                   base.failure_options, base.speed_options, base.observe_after)
    counts = _FORK_STATE.get("counts")  # shared memory: the parent shows every policy's progress
    slot = 2 * _FORK_STATE["policies"].index(name)

    report = _FORK_STATE.get("report")

    def progress(done: int, total: int) -> None:
        counts[slot], counts[slot + 1] = done, total
        if report is not None:
            report(_counts(counts, _FORK_STATE["policies"]))

    return run_one(jobs, cluster, spec, out, progress=progress if counts is not None else None)


def _counts(shared, policies: list[str]) -> dict[str, tuple[int, int]]:
    return {name: (shared[2 * i], shared[2 * i + 1]) for i, name in enumerate(policies)}


def compare_policies(jobs: list[Job], cluster: ClusterSpec, policies: list[str], out_dir: str | Path,
                     base: RunSpec | None = None, processes: int | None = None,
                     on_done: Callable[[str, dict], None] | None = None,
                     progress: Callable[[dict[str, tuple[int, int]]], None] | None = None) -> pd.DataFrame:
    """Run each policy (in parallel processes), write ``DIR/<policy>/`` and ``DIR/summary.csv``.

    ``base.policy_options`` maps a policy name to its options here. ``progress`` is called about
    five times a second with every policy's (jobs done, jobs) while they run.
    """
    import multiprocessing as mp  # here: `dlsched simulate` runs one policy in its own process

    if not policies:
        raise ValueError("no policies to compare")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    base = base or RunSpec()
    for name in policies:
        make_policy(name, base.placement)  # fail fast on an unknown name
    tasks = [(name, out / name) for name in policies]
    procs = processes if processes is not None else min(len(policies), os.cpu_count() or 1)
    summaries: dict[str, dict] = {}
    counts = mp.RawArray("q", 2 * len(policies)) if progress is not None else None
    _FORK_STATE.update(jobs=jobs, cluster=cluster, spec=base, counts=counts, policies=list(policies))
    try:
        if procs > 1 and len(policies) > 1 and "fork" in mp.get_all_start_methods():
            with mp.get_context("fork").Pool(procs) as pool:
                results = pool.imap(_child, tasks)
                for name, _ in tasks:
                    while True:
                        try:
                            summary = results.next(timeout=0.2)
                            break
                        except mp.TimeoutError:
                            if progress is not None:
                                progress(_counts(counts, policies))
                    summaries[name] = summary
                    if on_done:
                        on_done(name, summary)
        else:
            _FORK_STATE["report"] = progress  # same process: report as the engine goes
            for task in tasks:
                summaries[task[0]] = _child(task)
                if on_done:
                    on_done(task[0], summaries[task[0]])
    finally:
        _FORK_STATE.clear()
    table = comparison_table(policies, summaries)
    table.to_csv(out / "summary.csv", index=False)
    return table


def comparison_table(policies: list[str], summaries: dict[str, dict]) -> pd.DataFrame:
    """One row per policy with the scalar summary keys and ratios to the first policy."""
    rows = []
    first = summaries[policies[0]]
    for name in policies:
        s = summaries[name]
        row = {"policy": name, **{k: s.get(k) for k in SUMMARY_KEYS}}
        for key in ("avg_jct", "avg_queue_delay", "queued_jobs"):
            row[f"ratio_{key}"] = (s[key] / first[key]) if first.get(key) else float("nan")
        rows.append(row)
    import pandas as pd  # here, not at module level: `dlsched simulate` never needs pandas

    return pd.DataFrame(rows)


def load_summary(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "summary.json").read_text())
