"""ETA accuracy in the simulator: how close is "when will my job start?" to the actual start?

During one simulation a kernel clock observer (:class:`EtaSampler`) takes, at ``samples`` evenly
spaced times, the forward-simulation ETA (:class:`~dlsched.sim.eta.EtaEstimator`) of every waiting
job, and beside it a naive estimate: ``(position in its VC's queue + 1) x mean duration / jobs
running in the VC`` (the queue drains at about one job per mean duration per running job; the mean
is over the jobs finished so far, the queue's mean prediction before any has). When the run ends,
every sampled estimate is compared with the job's actual (first) start: median absolute error,
share within 10 % of the actual wait from the sample time, share within one hour, by job size
(1 GPU, 2-8, >8 GPUs).

Calibration (on by default): the predictions are scaled by the run time of the jobs finished so
far over their predictions (:class:`~dlsched.sim.eta.Calibration`), since a start time sums the
durations ahead and duration predictors aim at the median.

Predictions: the policy's own where it sets them (QSSF's online estimator writes
``pred_duration`` at submission); otherwise (FIFO) a separate
:class:`~dlsched.predictors.duration.online.OnlineDurationEstimator` that learns only from jobs
finished before each sample. Nothing reads the ground truth of an unfinished job.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from dlsched.core.job import Job, JobState
from dlsched.core.truth import duration as true_duration
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stop import StopReason
from dlsched.sim.eta import Calibration, EtaEstimator

GROUPS: tuple[tuple[str, int, int], ...] = (("all", 1, 1 << 30), ("1 GPU", 1, 1), ("2-8 GPUs", 2, 8),
                                            (">8 GPUs", 9, 1 << 30))
MAX_SAMPLES = 2000
METHODS: tuple[tuple[str, str], ...] = (("forward simulation", "eta"), ("naive (position x mean / running)", "naive"),
                                        ("forward simulation, true durations (diagnostic)", "eta_true"))
HOUR = 3600.0


@dataclass(slots=True)
class Sample:
    """One estimate of one waiting job at one sample time."""

    job: Job
    at: float
    eta: float
    naive: float
    eta_true: float = math.nan   # the forward run with true durations (diagnostic); NaN: not taken


@dataclass
class EtaSampler:
    """A kernel clock observer: at each time of ``times`` the ETAs of every waiting job."""

    estimator: EtaEstimator
    times: list[float]
    learner: object = None                  # an OnlineDurationEstimator for policies without predictions
    progress: Callable[[int, int], None] | None = None
    truth: EtaEstimator | None = None       # the same forward run on true durations (diagnostic)
    samples: list[Sample] = field(default_factory=list)
    refreshes: int = 0
    refresh_seconds: float = 0.0
    skipped: int = 0                        # sample times with no transition between them (same state)
    probes: int = 0                         # instants looked at in vain (no job waiting)
    _i: int = 0
    _done: list = field(default_factory=list)
    _run_sum: float = 0.0
    _run_n: int = 0
    _pred: dict = field(default_factory=dict)
    _seen: float = -math.inf

    def attach(self, state: ClusterState) -> None:
        self.state = state
        state.add_clock(self._tick)

    # transition observer hooks run after the clock callbacks of their instant: ``_seen`` is the
    # time of the last transition before the one that runs a callback
    def submitted(self, job: Job, vc, now: float) -> None:
        self._seen = now

    def started(self, job: Job, vc, now: float) -> None:
        self._seen = now

    def stopped(self, job: Job, vc, now: float, why: StopReason) -> None:
        self._seen = now
        if why is StopReason.FINISHED:
            self._done.append(job)  # learnt from at the next sample, once it is FINISHED

    def _predict(self, job: Job) -> float:
        hit = self._pred.get(job)
        if hit is None:
            hit = self._pred[job] = self.learner.estimate_parts(job, self._at)[2]
        return hit

    def _tick(self, now: float) -> float:
        """Due sample: with jobs waiting, refresh; with none, look again at the next instant (a
        refresh measures something), until the next sample time is due."""
        times = self.times
        if self._i >= len(times):
            return math.inf
        if times[self._i] > now:
            return times[self._i]
        j = self._i
        while j + 1 < len(times) and times[j + 1] <= now:
            j += 1
        self.skipped += j - self._i
        self._i = j
        state = self.state
        if not state.n_pending:
            self.probes += 1
            return math.nextafter(now, math.inf)   # the first transition of a later instant
        # the state is as it was after the last transition (before now): its time, or the sample's
        at = self._at = max(times[j], self._seen)
        self._i = j + 1
        self._sample(at)
        if self.progress is not None:
            self.progress(self._i, len(times))
        return times[self._i] if self._i < len(times) else math.inf

    def _sample(self, at: float) -> None:
        calibration = self.estimator.calibration
        for job in self._done:
            if job.state is JobState.FINISHED:
                ran = job.end_time - job.start_time   # observed, as a live service sees it
                self._run_sum += ran
                self._run_n += 1
                if calibration is not None:
                    pred = job.pred_duration
                    calibration.observe(self._pred.get(job, math.nan) if math.isnan(pred) else pred, ran)
                if self.learner is not None:
                    self.learner.observe_finished(job, max(job.end_time, 0.0))
        self._done = [j for j in self._done if j.state is not JobState.FINISHED]
        state = self.state
        if not state.n_pending:
            return
        t0 = time.perf_counter()
        result = self.estimator.estimate(state, at)
        self.refresh_seconds += time.perf_counter() - t0
        self.refreshes += 1
        eta = result.eta
        true_eta = self.truth.estimate(state, at).eta if self.truth is not None else {}
        for vc in state.vcs:
            if not vc.pending:
                continue
            order = list(vc.queue)
            if self._run_n:
                mean = self._run_sum / self._run_n
            else:
                preds = [d for d in (self._duration_of(j) for j in order) if not math.isnan(d)]
                mean = sum(preds) / len(preds) if preds else HOUR
            rate = max(1, len(vc.running))
            for pos, job in enumerate(order):
                self.samples.append(Sample(job, at, eta.get(job, math.inf), at + (pos + 1) * mean / rate,
                                           true_eta.get(job, math.nan)))

    def _duration_of(self, job: Job) -> float:
        d = job.pred_duration
        if not math.isnan(d):
            return d
        return self._predict(job) if self.learner is not None else math.nan


def accuracy_rows(samples: list[Sample]) -> list[dict]:
    """Per method (forward simulation, naive) and job-size group: count, median absolute error
    (hours) beside the median of the actual waits still ahead at the sample times, share within
    10 % of that wait, share within 1 h, estimates that said never."""
    rows = []
    if not samples:
        return rows
    gpus = np.fromiter((s.job.gpus for s in samples), int, len(samples))
    start = np.fromiter((s.job.start_time for s in samples), float, len(samples))
    at = np.fromiter((s.at for s in samples), float, len(samples))
    wait = np.maximum(start - at, 0.0)
    for method, attr in METHODS:
        est = np.fromiter((getattr(s, attr) for s in samples), float, len(samples))
        if np.isnan(est).all():
            continue
        err = np.abs(est - start)
        for name, lo, hi in GROUPS:
            sel = (gpus >= lo) & (gpus <= hi)
            n = int(sel.sum())
            if not n:
                continue
            e, w = err[sel], wait[sel]
            rows.append({"method": method, "group": name, "estimates": n,
                         "jobs": len({id(s.job) for s, k in zip(samples, sel) if k}),
                         "median_abs_error_h": float(np.median(e)) / HOUR,
                         "median_wait_h": float(np.median(w)) / HOUR,
                         "within_10pct": float(np.mean(e <= 0.1 * w + 1e-9)),
                         "within_1h": float(np.mean(e <= HOUR)),
                         "never": int(np.isinf(est[sel]).sum())})
    return rows


def sample_times(jobs: list[Job], samples: int) -> list[float]:
    """``samples`` evenly spaced times strictly inside the arrival span."""
    if samples < 1 or samples > MAX_SAMPLES:
        raise ValueError(f"--samples must be between 1 and {MAX_SAMPLES}, got {samples}")
    first = min(j.submit_time for j in jobs)
    last = max(j.submit_time for j in jobs)
    step = (last - first) / (samples + 1)
    return [first + step * (i + 1) for i in range(samples)]


def run_accuracy(jobs: list[Job], cluster, policy_name: str, samples: int = 50, placement: str | None = None,
                 origin=None, progress: Callable[[int, int], None] | None = None,
                 overrun: float = 0.5, diagnose: bool = True, calibrate: bool = True) -> dict:
    """Simulate ``jobs`` on ``cluster`` under ``policy_name`` (its default parameters) with an
    :class:`EtaSampler`; the accuracy table. ``origin``: the trace's wall-clock origin (QSSF's
    calendar features). The run is built as every run is (:func:`~dlsched.run.build.build_run`
    on the given input), the sampler added as the caller's observer."""
    from dlsched.run.build import Inputs, build_run
    from dlsched.run.config import PlacementConfig, PolicyConfig, RunConfig

    if not jobs:
        raise ValueError("no jobs to simulate")
    config = RunConfig(policy=PolicyConfig(policy_name), placement=PlacementConfig(placement))
    run = build_run(config, inputs=Inputs(jobs, cluster, origin, "", "V100"))
    policy = run.policy()
    learner = None
    if getattr(policy, "estimator", None) is None and getattr(policy, "priorities", None) is None:
        from dlsched.predictors.duration.online import OnlineDurationEstimator

        learner = OnlineDurationEstimator()
    # the diagnostic reads the truth, as the engine does: never an input of the estimate itself
    truth = EtaEstimator(policy, overrun=overrun, duration_of=true_duration) if diagnose else None
    calibration = Calibration() if calibrate else None
    sampler = EtaSampler(EtaEstimator(policy, overrun=overrun, calibration=calibration), sample_times(jobs, samples),
                         learner, progress, truth)
    if learner is not None:
        sampler.estimator.predict = sampler._predict
    t0 = time.perf_counter()
    result = run.engine((sampler,), policy).simulator.run(jobs)
    wall = time.perf_counter() - t0
    rows = accuracy_rows(sampler.samples)
    return {"policy": policy_name, "jobs": len(jobs), "samples": samples, "refreshes": sampler.refreshes,
            "samples_skipped": sampler.skipped, "empty_queue_probes": sampler.probes,
            "calibration_factor": calibration.factor if calibration is not None else None,
            "estimates": len(sampler.samples), "refresh_seconds": sampler.refresh_seconds,
            "mean_refresh_ms": 1000 * sampler.refresh_seconds / max(1, sampler.refreshes),
            "seconds": wall, "overrun": overrun, "events": result.events,
            "predictions": "policy" if learner is None else "online QSSF estimator (separate)",
            "rows": rows}
