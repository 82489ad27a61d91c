"""Feature encoding for the GBDT duration model (P_M).

Columns: user, VC and name-cluster codes (LightGBM categoricals; -1 = unknown → missing),
GPU and CPU demand, and the submit time split into month / weekday / hour / minute
(Helios §4.2.2). Without a wall-clock origin the trace has relative times only: weekday and
hour/minute are then taken relative to time 0 (they still capture daily and weekly cycles if
the trace starts at midnight) and month is missing.

Vocabularies only grow through ``encode(..., learn=True)``, which is used for training rows;
prediction rows are looked up without changing them.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

import numpy as np

from dlsched.core.job import Job
from dlsched.predictors.duration.names import NameClusterer, is_anonymous, job_bucket

FEATURES: tuple[str, ...] = ("user", "vc", "name", "gpus", "cpus", "month", "weekday", "hour", "minute")
CATEGORICAL: tuple[int, ...] = (0, 1, 2)
_NAN = float("nan")


class FeatureEncoder:
    """Turns jobs into rows of ``FEATURES`` (float64) with stable category codes."""

    def __init__(self, origin: datetime | None = None, min_similarity: float = 0.8) -> None:
        self.origin = origin
        self._users: dict[str, int] = {}
        self._vcs: dict[str, int] = {}
        self._names = NameClusterer(min_similarity)

    def _code(self, vocab: dict[str, int], key: str, learn: bool) -> int:
        code = vocab.get(key)
        if code is None:
            if not learn:
                return -1
            code = vocab[key] = len(vocab)
        return code

    def time_features(self, submit_time: float) -> tuple[float, float, float, float]:
        """(month, weekday, hour, minute) of a submit time given in seconds from the origin."""
        if self.origin is not None:
            t = self.origin + timedelta(seconds=float(submit_time))
            return float(t.month), float(t.weekday()), float(t.hour), float(t.minute)
        s = float(submit_time)
        day, sec = divmod(s, 86400.0)
        return _NAN, float(day % 7), float(sec // 3600), float((sec % 3600) // 60)

    def row(self, job: Job, learn: bool = False) -> list[float]:
        """One feature row; ``learn`` adds unseen categories to the vocabularies."""
        user = -1 if is_anonymous(job.user) else self._code(self._users, job.user, learn)
        vc = self._code(self._vcs, str(job.vc), learn)
        b = job_bucket(job)
        name = self._names.add(b) if learn else self._names.lookup(b)
        return [float(user), float(vc), float(name), float(job.gpus), float(job.cpus),
                *self.time_features(job.submit_time)]

    def encode(self, jobs: Sequence[Job], learn: bool = False) -> np.ndarray:
        """Feature matrix (len(jobs) × len(FEATURES))."""
        out = np.empty((len(jobs), len(FEATURES)), dtype=np.float64)
        for i, job in enumerate(jobs):
            out[i] = self.row(job, learn)
        return out
