"""One co-location run and its metrics: a sharing workload, a policy, the ground truth.

Every run regenerates its workload from the seed (a run changes jobs: the failover corrects
their predicted memory) on the chosen **truth** (:func:`dlsched.models.truth.resolve_truth`:
``builtin`` by default, ``lucid``, a profiles folder or ``.json``), whose seeded table gives each
job its true utilisation and memory; gives it the predictions of the chosen kind and simulates it
with the truth's ``colocation`` speed model (measured pairs), the OOM failure model and the
delivered-utilisation observer. Predictions are computed once per (workload, seed, truth) and reused.

Prediction kinds: ``real`` (the shipped utilisation/memory predictors from graph features, a
noisy prior where a model does not resolve: :func:`~dlsched.workloads.attach_predictions`)
or ``perfect`` (predictions = the measured truth, to separate policy quality from prediction
error).
"""

from __future__ import annotations

import math
import statistics
import zlib
from dataclasses import dataclass, field
from functools import lru_cache

from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import gpu_mem_mib as true_mem
from dlsched.core.truth import gpu_util as true_util
from dlsched.workloads import Workload, attach_predictions, make_workload
from dlsched.models.failure import OutOfMemory
from dlsched.models.truth import Truth, resolve_truth
from dlsched.registry import make_policy
from dlsched.run.config import OptionError
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead

PREDICTIONS = ("real", "perfect")


@dataclass(frozen=True)
class PolicyRun:
    """A row of an experiment: label, registry policy, its options, jobs per GPU (1 = no sharing)."""

    label: str
    policy: str
    cap: int = 2
    options: tuple[tuple[str, object], ...] = ()


@dataclass
class RunResult:
    label: str
    seed: int
    metrics: dict[str, float] = field(default_factory=dict)


@lru_cache(maxsize=256)
def _predictions(workload: str, seed: int, jobs: int | None, truth: Truth,
                 gpu: str | None = None) -> dict[str, tuple[float, float]]:
    wl = make_workload(workload, seed=seed, jobs=jobs, table=truth.table_for(seed), gpu=gpu)
    attach_predictions(wl.trace.jobs, wl.gpu, seed=seed)
    return {j.job_id: (j.pred_gpu_util, j.pred_gpu_mem_mib) for j in wl.trace.jobs}


def prepared(workload: str, seed: int, predictions: str = "real", jobs: int | None = None,
             truth: Truth | None = None, gpu: str | None = None) -> Workload:
    """A fresh copy of the workload on ``truth`` (default ``builtin``) with predictions of the given
    kind; ``gpu`` overrides the workload's GPU type."""
    if predictions not in PREDICTIONS:
        raise ValueError(f"unknown predictions {predictions!r}; choose from {', '.join(PREDICTIONS)}")
    truth = truth or resolve_truth()
    wl = make_workload(workload, seed=seed, jobs=jobs, table=truth.table_for(seed), gpu=gpu)
    if predictions == "perfect":
        for j in wl.trace.jobs:
            j.pred_gpu_util, j.pred_gpu_mem_mib = true_util(j), true_mem(j)
    else:
        pred = _predictions(workload, seed, jobs, truth, gpu)
        for j in wl.trace.jobs:
            j.pred_gpu_util, j.pred_gpu_mem_mib = pred[j.job_id]
    return wl


def pooled(wl: Workload, nodes: int) -> tuple[list[Job], object, int]:
    """The workload's jobs on one pool of ``nodes`` nodes (its GPUs per node and GPU type), as
    Horus's simulation (one 128 x 8-GPU cluster); jobs wider than the pool are left out and
    counted."""
    from dlsched.core.cluster import ClusterSpec, gpu_type

    total = nodes * wl.gpus_per_node
    kept = [j for j in wl.trace.jobs if j.gpus <= total]
    for j in kept:
        j.vc = "all"
    cluster = ClusterSpec.from_vc_sizes({"all": nodes}, wl.gpus_per_node, gpu_type(wl.gpu))
    return kept, cluster, len(wl.trace.jobs) - len(kept)


def constructor_keywords(spec: PolicyRun) -> dict:
    """The policy's constructor keywords for ``spec``: options that are fields of the parameters
    the policy declares go through them (typed, checked, mapped by its ``from_params`` as in any
    run); the harness's own objects (a fitted interference model, the profile table) pass as given."""
    from dlsched.run.params import PolicyContext, constructor_options, field_kinds, make_params, params_class

    given = dict(spec.options)
    fields = field_kinds(params_class(spec.policy))
    params, _ = make_params(spec.policy, {k: v for k, v in given.items() if k in fields})
    context = PolicyContext(profiles=given.get("profiles"))
    return {**constructor_options(spec.policy, params, context), **{k: given[k] for k in given if k not in fields}}


def run(workload: str, spec: PolicyRun, seed: int, predictions: str = "real", jobs: int | None = None,
        nodes: int | None = None, truth: Truth | None = None, history: list | None = None,
        gpu: str | None = None) -> RunResult:
    """Simulate one policy on one seeded workload (on one pool of ``nodes`` nodes if given) on
    ``truth``; returns its metrics. ``history``: a list the per-job rate and co-runner rows are
    appended to (:class:`~dlsched.experiments.history.RateHistory`)."""
    from dlsched.experiments.history import RateHistory
    from dlsched.metrics.delivered import DeliveredUtilisation

    truth = truth or resolve_truth()
    wl = prepared(workload, seed, predictions, jobs, truth, gpu)
    if nodes:
        job_list, cluster, left_out = pooled(wl, nodes)
    else:
        job_list, cluster, left_out = wl.trace.jobs, wl.cluster(), 0
    try:  # an oracle is granted the truth
        policy = make_policy(spec.policy, share=spec.cap > 1, **constructor_keywords(spec))
    except (TypeError, ValueError) as exc:  # a --policies option the policy does not take, or a bad value
        text = str(exc)
        if isinstance(exc, OptionError):  # checked by the policy's parameters: named as typed here (k=...)
            text = text.replace(f"--param {exc.key}", exc.key)
        elif "unexpected keyword argument" in text:
            text = f"{spec.policy} takes no option {text.rsplit(' ', 1)[-1]}"
        elif "invalid literal" in text or "could not convert" in text:
            text = f"an option's value is not a number ({text.rsplit(': ', 1)[-1]})"
        raise ValueError(f"--policies {spec.label}: {text}") from None
    delivered = DeliveredUtilisation()
    observers: tuple = (delivered,)
    recorder = None
    if history is not None:
        recorder = RateHistory(spec.label, seed)
        observers += (recorder,)
    config = SimConfig(preemption_overhead=no_overhead, max_jobs_per_gpu=spec.cap)
    oom = OutOfMemory()
    sim = Simulator(cluster, policy, config, speed_model=truth.speed_model(), failure_model=oom,
                    observers=observers)
    res = sim.run(job_list)
    if recorder is not None:
        history.extend(recorder.finish(res.jobs))
    metrics = job_metrics(res.jobs)
    metrics["busy_gpu_utilization"] = res.metrics.gpu_utilization()
    metrics["delivered_gpu_utilization"] = delivered.summary(res.metrics)["delivered_gpu_utilization"]
    metrics["failures"] = float(res.extra.get("failures", 0))
    metrics["oom_called_off"] = float(oom.disarmed)
    metrics["decisions"] = float(zlib.crc32(";".join(f"{j.job_id}@{j.start_time:.3f}/{j.failures}/{j.preemptions}"
                                                     for j in res.jobs).encode()))
    metrics["requeued"] = float(getattr(policy, "requeued", 0))
    metrics["left_out_too_wide"] = float(left_out)
    return RunResult(spec.label, seed, metrics)


def job_metrics(jobs: list[Job]) -> dict[str, float]:
    """Makespan (first submission to last end), JCT from submission (Co-scheML) and from the
    start (Horus), waiting time, and speed = solo time / time actually run (1 = no slowdown)."""
    first = min(j.submit_time for j in jobs)
    waits = [j.queue_delay for j in jobs]
    run = [j.end_time - j.submit_time - j.queue_delay for j in jobs]
    return {
        "makespan": max(j.end_time for j in jobs) - first,
        "avg_jct": statistics.fmean(j.end_time - j.submit_time for j in jobs),
        "avg_run_time": statistics.fmean(run),
        "avg_wait": statistics.fmean(waits),
        "median_wait": statistics.median(waits),
        "std_wait": statistics.pstdev(waits),
        "speed": statistics.fmean(true_duration(j) / r for j, r in zip(jobs, run) if r > 0),
    }


def over_seeds(workload: str, specs: list[PolicyRun], seeds: list[int], predictions: str = "real",
               jobs: int | None = None, nodes: int | None = None, truth: Truth | None = None,
               history: list | None = None, gpu: str | None = None) -> dict[str, list[RunResult]]:
    """Every policy on every seed: label -> its runs (in seed order, so runs pair up by seed)."""
    return {s.label: [run(workload, s, seed, predictions, jobs, nodes, truth, history, gpu) for seed in seeds]
            for s in specs}


def mean_std(runs: list[RunResult], key: str) -> tuple[float, float]:
    values = [r.metrics[key] for r in runs]
    return statistics.fmean(values), (statistics.pstdev(values) if len(values) > 1 else 0.0)


def gain(base: float, value: float) -> float:
    """Relative reduction against ``base`` (0.307 = 30.7 % lower)."""
    return (base - value) / base if base else math.nan
