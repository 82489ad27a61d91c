"""One co-location run and its metrics: a sharing workload, a policy, the ground truth.

Every run regenerates its workload from the seed (a run changes jobs: the failover corrects
their predicted memory) on the chosen **truth** (:func:`dlsched.models.truth.resolve_truth`:
``builtin`` by default, ``lucid``, a profiles folder or ``.json``), whose seeded table gives each
job its true utilisation and memory; gives it the predictions of the chosen kind and simulates it
with the truth's ``colocation`` speed model (measured pairs), the OOM failure model and the
delivered-utilisation observer. Predictions are computed once per (workload, seed, truth) and reused.

A run is described like any other, as a :class:`~dlsched.run.config.RunConfig` (:func:`run_config`),
and built by :func:`~dlsched.run.build.build_run`; what only these experiments need (a pool of the
workload's nodes, perfect predictions, a fitted interference model passed to the policy) are
fields of that configuration, not a simulator assembled here.

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

from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.models.truth import Truth, resolve_truth
from dlsched.run.config import OptionError, RunConfig
from dlsched.run.workload import TOO_WIDE
from dlsched.workloads import Workload, make_workload

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


def _check_predictions(predictions: str) -> None:
    if predictions not in PREDICTIONS:
        raise ValueError(f"unknown predictions {predictions!r}; choose from {', '.join(PREDICTIONS)}")


def prepared(workload: str, seed: int, predictions: str = "real", jobs: int | None = None,
             truth: Truth | None = None, gpu: str | None = None) -> Workload:
    """A fresh copy of the workload on ``truth`` (default ``builtin``) with predictions of the given
    kind (the same ones a run of :func:`run` gets); ``gpu`` overrides the workload's GPU type."""
    from dlsched.run.workload import give_predictions

    _check_predictions(predictions)
    truth = truth or resolve_truth()
    wl = make_workload(workload, seed=seed, jobs=jobs, table=truth.table_for(seed), gpu=gpu)
    give_predictions(wl.trace.jobs, workload, seed, jobs, truth, gpu, predictions == "perfect")
    return wl


def truth_name(truth: Truth) -> str:
    """The name a run configuration gives ``truth`` (``ModelsConfig.profiles``): the runs must see
    this very object again, so a truth that the resolver does not return by its name is refused."""
    if resolve_truth(truth.name) is not truth:
        raise ValueError(f"truth {truth.name!r} is not the one resolve_truth({truth.name!r}) returns: "
                         "name a truth by resolve_truth")
    return truth.name


def _split_options(spec: PolicyRun) -> tuple[object, tuple[tuple[str, object], ...]]:
    """``spec``'s options as the policy's parameter dataclass (the options that are its fields:
    typed, checked and mapped by its ``from_params`` as in any run) and the harness's own objects
    (a fitted interference model, the profile table), passed to the constructor as given."""
    from dlsched.run.params import field_kinds, make_params, params_class

    fields = field_kinds(params_class(spec.policy))
    params, _ = make_params(spec.policy, {k: v for k, v in spec.options if k in fields})
    return params, tuple((k, v) for k, v in spec.options if k not in fields)


def run_config(workload: str, spec: PolicyRun, seed: int, predictions: str = "real", jobs: int | None = None,
               nodes: int | None = None, truth: Truth | None = None, gpu: str | None = None) -> RunConfig:
    """The run of ``spec`` on seed ``seed`` of ``workload`` as a :class:`~dlsched.run.config.RunConfig`:
    the truth's pairs (``colocation``) and OOM failures as the ground truth, no preemption overhead,
    ``spec.cap`` jobs per GPU, predictions of the given kind, on one pool of ``nodes`` of the
    workload's nodes when given. Raises ``OptionError`` for an option the policy's parameters reject."""
    from dlsched.run import config as C
    from dlsched.workloads import WORKLOADS

    _check_predictions(predictions)
    if workload not in WORKLOADS:  # as make_workload says it (the experiment commands' own wording)
        raise ValueError(f"unknown workload {workload!r}; choose from {', '.join(WORKLOADS)}")
    params, objects = _split_options(spec)
    return RunConfig(
        workload=C.WorkloadConfig(workload=workload, seed=seed, gpu=gpu, workload_jobs=jobs,
                                  predict_resources=predictions == "real",
                                  perfect_predictions=predictions == "perfect"),
        cluster=C.ClusterConfig(pool=nodes or None),
        policy=C.PolicyConfig(spec.policy, params, objects=objects),
        placement=C.PlacementConfig(max_jobs_per_gpu=spec.cap),
        models=C.ModelsConfig(speed="colocation", failure="oom", profiles=truth_name(truth or resolve_truth())),
        engine=C.EngineConfig(preemption_overhead=0.0))


def constructor_keywords(spec: PolicyRun) -> dict:
    """The policy's constructor keywords for ``spec`` outside a run: its parameters mapped by its
    ``from_params`` (with the ``profiles`` option as the profile table), then the harness's own
    objects as given."""
    from dlsched.run.params import PolicyContext, constructor_options

    params, objects = _split_options(spec)
    context = PolicyContext(profiles=dict(spec.options).get("profiles"))
    return {**constructor_options(spec.policy, params, context), **dict(objects)}


def _policy_error(spec: PolicyRun, exc: Exception) -> ValueError:
    """A --policies option the policy does not take, or a bad value, as one line naming the row."""
    text = str(exc)
    if isinstance(exc, OptionError):  # checked by the policy's parameters: named as typed here (k=...)
        text = text.replace(f"--param {exc.key}", exc.key)
    elif "unexpected keyword argument" in text:
        text = f"{spec.policy} takes no option {text.rsplit(' ', 1)[-1]}"
    elif "invalid literal" in text or "could not convert" in text:
        text = f"an option's value is not a number ({text.rsplit(': ', 1)[-1]})"
    return ValueError(f"--policies {spec.label}: {text}")


def run(workload: str, spec: PolicyRun, seed: int, predictions: str = "real", jobs: int | None = None,
        nodes: int | None = None, truth: Truth | None = None, history: list | None = None,
        gpu: str | None = None) -> RunResult:
    """Simulate one policy on one seeded workload (on one pool of ``nodes`` nodes if given) on
    ``truth``; returns its metrics. The run is built as every run is, from its
    :func:`run_config` by :func:`~dlsched.run.build.build_run`. ``history``: a list the per-job
    rate and co-runner rows are appended to (:class:`~dlsched.experiments.history.RateHistory`)."""
    from dlsched.experiments.history import RateHistory
    from dlsched.metrics.delivered import DeliveredUtilisation
    from dlsched.run.build import build_run

    _check_predictions(predictions)
    try:  # the row's own options first: an error names the row as typed (--policies horus:k=abc)
        _split_options(spec)
    except (TypeError, ValueError) as exc:
        raise _policy_error(spec, exc) from None
    built = build_run(run_config(workload, spec, seed, predictions, jobs, nodes, truth, gpu))
    recorder = RateHistory(spec.label, seed) if history is not None else None
    try:  # an oracle is granted the truth
        engine = built.engine(observers=(recorder,) if recorder is not None else ())
    except (TypeError, ValueError) as exc:  # a --policies option the policy does not take, or a bad value
        raise _policy_error(spec, exc) from None
    sim = engine.simulator
    res = sim.run(built.inputs.jobs)
    if recorder is not None:
        history.extend(recorder.finish(res.jobs))
    delivered = next(o for o in engine.observers if isinstance(o, DeliveredUtilisation))
    metrics = job_metrics(res.jobs)
    metrics["busy_gpu_utilization"] = res.metrics.gpu_utilization()
    metrics["delivered_gpu_utilization"] = delivered.summary(res.metrics)["delivered_gpu_utilization"]
    metrics["failures"] = float(res.extra.get("failures", 0))
    metrics["oom_called_off"] = float(sim.failure_model.disarmed)
    metrics["decisions"] = float(zlib.crc32(";".join(f"{j.job_id}@{j.start_time:.3f}/{j.failures}/{j.preemptions}"
                                                     for j in res.jobs).encode()))
    metrics["requeued"] = float(getattr(sim.policy, "requeued", 0))
    metrics["left_out_too_wide"] = float(built.inputs.filtered.get(TOO_WIDE, 0))
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
