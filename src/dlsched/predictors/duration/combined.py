"""Offline QSSF estimator: P = N × (λ·P_R + (1−λ)·P_M) fitted once on a set of past jobs.

λ (``lam``): the paper (Algorithm 1, line 20) calls it the "merging coefficient" without a
value; the authors' simulator (HeliosArtifact ``CombinedEstimator``) uses 0.1 — mostly the
GBDT, with the name history as a correction — so 0.1 is the default here too.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np

from dlsched.core.job import Job
from dlsched.predictors.duration.features import FeatureEncoder
from dlsched.predictors.duration.gbdt import GBDTParams
from dlsched.predictors.duration.rolling import RollingEstimator

DEFAULT_LAMBDA = 0.1
BLENDS: tuple[str, ...] = ("linear", "log")


def check_lambda(lam: float) -> float:
    if not 0.0 <= lam <= 1.0:
        raise ValueError(f"lam (merging coefficient λ) must be in [0, 1], got {lam}")
    return float(lam)


def check_blend(blend: str) -> str:
    if blend not in BLENDS:
        raise ValueError(f"blend must be one of {', '.join(BLENDS)}, got {blend!r}")
    return blend


def merge(pr: float | np.ndarray, pm: float | np.ndarray, lam: float,
          blend: str = "linear") -> float | np.ndarray:
    """λ·P_R + (1−λ)·P_M (``linear``, the paper's formula), or the same weights on
    log(1+seconds) (``log``): a geometric blend that keeps a heavy-tailed mean in P_R from
    swamping a short P_M. Works on floats and numpy arrays alike."""
    if blend == "linear":
        return lam * pr + (1.0 - lam) * pm
    return np.expm1(lam * np.log1p(pr) + (1.0 - lam) * np.log1p(pm))


class CombinedDurationEstimator:
    """Batch form (fit on history, predict new jobs), scikit-learn style.

    ``fit(jobs, durations, origin=None)``: ``jobs`` are finished jobs and ``durations`` what
    history recorded of them, in the same order (the caller reads them, e.g.
    ``map(dlsched.core.truth.duration, jobs)``: an estimator never reads truth); ``origin`` is
    the trace's wall-clock origin for the time features (or pass a ``Trace`` as ``jobs``).
    ``predict(jobs)`` → expected durations (s); ``priority(jobs)`` → × GPUs.
    """

    def __init__(self, lam: float = DEFAULT_LAMBDA, decay: float = 0.5, min_similarity: float = 0.8,
                 n_estimators: int = GBDTParams.n_estimators, learning_rate: float = GBDTParams.learning_rate,
                 num_leaves: int = GBDTParams.num_leaves,
                 min_child_samples: int = GBDTParams.min_child_samples, blend: str = "linear",
                 anonymous: str = "vc_gpus", n_jobs: int = GBDTParams.n_jobs,
                 random_state: int = GBDTParams.random_state) -> None:
        self.lam = lam
        self.blend = blend
        self.anonymous = anonymous
        self.decay = decay
        self.min_similarity = min_similarity
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.n_jobs = n_jobs
        self.random_state = random_state

    def fit(self, jobs: Sequence[Job], durations: Sequence[float],
            origin: datetime | None = None) -> CombinedDurationEstimator:
        check_lambda(self.lam)
        check_blend(self.blend)
        origin = getattr(jobs, "origin", origin)
        jobs = list(getattr(jobs, "jobs", jobs))
        if not jobs:
            raise ValueError("fit needs at least one finished job")
        self.encoder_ = FeatureEncoder(origin, self.min_similarity)
        X = self.encoder_.encode(jobs, learn=True)
        recorded = np.array(durations, dtype=np.float64)
        if len(recorded) != len(jobs):
            raise ValueError(f"fit needs one duration per job: {len(jobs)} jobs, {len(recorded)} durations")
        self.gbdt_ = GBDTParams.of(self).model().fit(X, recorded)
        self.rolling_ = RollingEstimator(self.decay, self.min_similarity, anonymous=self.anonymous)
        for k in sorted(range(len(jobs)), key=lambda k: jobs[k].submit_time + recorded[k]):
            self.rolling_.observe(jobs[k], float(recorded[k]))
        return self

    def predict_parts(self, jobs: Sequence[Job]) -> tuple[np.ndarray, np.ndarray]:
        """(P_R, P_M) in seconds for each job."""
        jobs = list(getattr(jobs, "jobs", jobs))
        pr = np.array([self.rolling_.predict(j) for j in jobs], dtype=np.float64)
        pm = self.gbdt_.predict(self.encoder_.encode(jobs)) if jobs else np.empty(0)
        return pr, pm

    def predict(self, jobs: Sequence[Job]) -> np.ndarray:
        """Expected durations (s): λ·P_R + (1−λ)·P_M (see ``merge`` for ``blend``)."""
        pr, pm = self.predict_parts(jobs)
        return merge(pr, pm, self.lam, self.blend)

    def priority(self, jobs: Sequence[Job]) -> np.ndarray:
        """Expected GPU time (GPU-s), the QSSF ordering key: GPUs × predicted duration."""
        jobs = list(getattr(jobs, "jobs", jobs))
        return np.array([j.gpus for j in jobs], dtype=np.float64) * self.predict(jobs)
