"""Online QSSF duration estimator for use inside a simulation: it only ever learns from jobs
that have finished by the current simulated time, so no policy can see the future through it.

* ``observe_finished(job, now)`` when a job ends: updates the rolling estimate P_R at once and
  queues the job as a GBDT training row.
* ``estimate(job, now)`` / ``priority(job, now)``: P_R is recomputed (O(1)); P_M comes from
  the GBDT fitted at the last refit, cached per job and model version.
* The GBDT is refitted at the first call on or after each multiple of ``refit_every`` simulated
  seconds, on the most recent ``max_train_jobs`` finished jobs (:data:`TRAIN_WINDOW`, 100,000, by
  default: a refit's cost stays bounded on a trace of millions of jobs, instead of growing with
  the history; ``None``: every job finished so far); at a refit the jobs estimated but not yet
  finished are re-predicted in one batch. Before the first fit (fewer than ``min_train_jobs``
  finished jobs) P_M = P_R. A job estimated between refits is predicted through LightGBM's
  single-row entry point (:meth:`GBDTDurationModel.predict_one`: the same number, a third of the
  time).
* A refit is due on that schedule but is trained only when a prediction first needs the model
  (``estimate`` or reading ``model_``): with the rows the schedule fixed (the finished jobs at the
  due time, the waiting jobs encoded then), so every number is the eager refit's. A refit that no
  prediction reads before the next one is due -- a drain with no new submissions, a day with no
  estimate -- is never trained. ``n_refits`` counts the schedule's refits, ``n_fits`` the trained.

Time must not run backwards, and a job may only be observed once its end time has passed;
both raise ``ValueError`` — they would mean the caller leaks the future.
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterable
from datetime import datetime

import numpy as np

from dlsched.core.job import Job
from dlsched.predictors.duration.combined import DEFAULT_LAMBDA, check_blend, check_lambda, merge
from dlsched.predictors.duration.features import FEATURES, FeatureEncoder
from dlsched.predictors.duration.gbdt import GBDTDurationModel, GBDTParams
from dlsched.predictors.duration.observed import observed_duration
from dlsched.predictors.duration.rolling import RollingEstimator

_EPS = 1e-6
TRAIN_WINDOW = 100_000  # finished jobs a refit trains on (the most recent); larger than every figure's trace


class OnlineDurationEstimator:
    """Never-from-the-future P = N × (λ·P_R + (1−λ)·P_M) with periodic GBDT refits.

    ``origin``: the trace's wall-clock origin (``trace.origin``) for month/weekday/hour
    features; ``None`` → time of day relative to t = 0.
    """

    lazy_refits = True  # False: train each refit when it is due (the general path the tests compare)

    def __init__(self, refit_every: float = 86400.0, lam: float = DEFAULT_LAMBDA, decay: float = 0.5,
                 min_similarity: float = 0.8, n_estimators: int = GBDTParams.n_estimators,
                 learning_rate: float = GBDTParams.learning_rate, num_leaves: int = GBDTParams.num_leaves,
                 min_child_samples: int = GBDTParams.min_child_samples, min_train_jobs: int = 200,
                 max_train_jobs: int | None = TRAIN_WINDOW, blend: str = "linear",
                 anonymous: str = "vc_gpus", n_jobs: int = GBDTParams.n_jobs,
                 random_state: int = GBDTParams.random_state, origin: datetime | None = None) -> None:
        if refit_every <= 0:
            raise ValueError(f"refit_every must be > 0 seconds, got {refit_every}")
        self.refit_every = float(refit_every)
        self.lam = check_lambda(lam)
        self.decay = decay
        self.min_similarity = min_similarity
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.min_train_jobs = min_train_jobs
        self.max_train_jobs = max_train_jobs
        self.blend = check_blend(blend)
        self.anonymous = anonymous
        self.n_jobs = n_jobs
        self.random_state = random_state
        self.origin = origin
        self.reset()

    def reset(self) -> None:
        """Forget everything learned (e.g. before simulating the same trace again)."""
        self.rolling_ = RollingEstimator(self.decay, self.min_similarity, anonymous=self.anonymous)
        self.encoder_ = FeatureEncoder(self.origin, self.min_similarity)
        self._model: GBDTDurationModel | None = None
        self._due: tuple[int, int, list[Job], np.ndarray | None] | None = None  # a refit not trained yet
        self._X = np.empty((4096, len(FEATURES)), dtype=np.float64)
        self._y = np.empty(4096, dtype=np.float64)
        self._n = 0
        self._fitted_n = 0
        self._version = 0
        self._now = -math.inf
        self._next_refit = -math.inf
        self._cache: dict[Job, tuple[int, float]] = {}
        self._pending: dict[Job, None] = {}
        self.n_refits = 0
        self.n_fits = 0
        self.refit_seconds = 0.0       # wall time of the refits
        self.refit_cpu_seconds = 0.0   # and this process's CPU time in them (the benchmarks' clock)

    @property
    def model_(self) -> GBDTDurationModel | None:
        """The GBDT of the last refit due (trained now if it was not yet), or None before the first."""
        if self._due is not None:
            self._train_due()
        return self._model

    @property
    def n_observed(self) -> int:
        return self._n

    # -- learning -------------------------------------------------------------------------

    def _append(self, job: Job, duration: float) -> None:
        if self._n == len(self._y):
            self._X = np.concatenate([self._X, np.empty_like(self._X)])
            self._y = np.concatenate([self._y, np.empty_like(self._y)])
        self._X[self._n] = self.encoder_.row(job, learn=True)
        self._y[self._n] = duration
        self._n += 1
        self.rolling_.observe(job, duration)

    def prime(self, jobs: Iterable[Job], durations: Iterable[float]) -> None:
        """Learn from jobs that finished before the simulation starts (e.g. earlier months),
        then fit the GBDT at once. The caller hands what history recorded of them, their
        ``durations`` (in ``jobs`` order; e.g. ``map(dlsched.core.truth.duration, jobs)``)."""
        for job, d in sorted(zip(jobs, durations, strict=True), key=lambda jd: jd[0].submit_time + jd[1]):
            self._append(job, float(d))
        if self._n >= self.min_train_jobs:
            self._refit()
            self._train_due()

    def observe_finished(self, job: Job, now: float, duration: float | None = None) -> None:
        """Record a job that ended at or before ``now``: the duration its finish revealed
        (:func:`observed_duration`: the job must have finished), or ``duration`` where the caller
        replays history that recorded it (the job then ends at submit + duration unless it ran)."""
        d = observed_duration(job) if duration is None else float(duration)
        end = job.end_time if job.end_time >= 0 else job.submit_time + d
        if end > now + _EPS:
            raise ValueError(f"job {job.job_id!r} has not finished at t={now}: it ends at t={end} "
                             "(observing it would leak the future)")
        self._advance(now)
        self._append(job, d)
        self._pending.pop(job, None)
        self._cache.pop(job, None)

    def _advance(self, now: float) -> None:
        if now < self._now - _EPS:
            raise ValueError(f"time went backwards: t={now} after t={self._now}")
        self._now = now
        if now >= self._next_refit:
            self._next_refit = (math.floor(now / self.refit_every) + 1) * self.refit_every
            if self._n > self._fitted_n and self._n >= self.min_train_jobs:
                self._refit()

    def _refit(self) -> None:
        """A refit is due: fix its training rows and the waiting jobs' rows now, train later."""
        lo = 0 if self.max_train_jobs is None else max(0, self._n - self.max_train_jobs)
        pending = list(self._pending)
        rows = self.encoder_.encode(pending) if pending else None
        self._due = (lo, self._n, pending, rows)
        self._fitted_n = self._n
        self._version += 1
        self._cache.clear()
        self.n_refits += 1
        if not self.lazy_refits:
            self._train_due()

    def _train_due(self) -> None:
        """Train the refit that is due; the jobs that were waiting then and still are get their
        prediction in one batch (a job that finished since was dropped from the cache then)."""
        t0, c0 = time.perf_counter(), time.process_time()
        lo, n, pending, rows = self._due
        self._due = None
        self._model = GBDTParams.of(self).model().fit(self._X[lo:n], self._y[lo:n])
        if rows is not None:
            pm = self._model.predict(rows)
            v, still = self._version, self._pending
            self._cache = {job: (v, float(p)) for job, p in zip(pending, pm) if job in still}
        self.n_fits += 1
        self.refit_seconds += time.perf_counter() - t0
        self.refit_cpu_seconds += time.process_time() - c0

    # -- estimating -----------------------------------------------------------------------

    def estimate_parts(self, job: Job, now: float) -> tuple[float, float, float]:
        """(P_R, P_M, λ·P_R + (1−λ)·P_M) in seconds, from jobs finished by ``now``
        (the blend is geometric when ``blend="log"``)."""
        self._advance(now)
        pr = self.rolling_.predict(job)
        model = self.model_
        self._pending[job] = None
        if model is None:
            return pr, pr, pr
        hit = self._cache.get(job)
        if hit is not None and hit[0] == self._version:
            pm = hit[1]
        else:
            pm = model.predict_one(self.encoder_.row(job))
            self._cache[job] = (self._version, pm)
        return pr, pm, float(merge(pr, pm, self.lam, self.blend))

    def estimate(self, job: Job, now: float) -> float:
        """Expected duration (s) of ``job`` as known at ``now``; also stored in ``job.pred_duration``."""
        est = self.estimate_parts(job, now)[2]
        job.pred_duration = est
        return est

    def priority(self, job: Job, now: float) -> float:
        """QSSF key: expected GPU time = GPUs × ``estimate``; also stored in ``job.priority``."""
        p = job.gpus * self.estimate(job, now)
        job.priority = p
        return p
