"""Horus's interference curve: slowdown as a function of the pair's cumulative GPU utilisation.

Horus (TPDS'21, §3.2) observes JCT slowdown growing about linearly with ``U = u_a + u_b`` up to
100 % and quadratically once the GPU is over-committed, with coefficients that differ by GPU
model. We fit ``s(U) = c0 + c1*U + c2*max(0, U - 100)^2`` (continuous and smooth at the knee),
one curve per GPU type with at least ``min_samples`` training sides, and one pooled curve for the
other types. ``c2 >= 0`` (over-commitment never helps); the fit minimises relative squared error
(weights 1/s^2), the scale MAPE judges. Jobs of unknown utilisation (NaN) get the pooled mean
slowdown. Three or more jobs: the shared pairwise rule, not ``U`` summed over all jobs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import JobProfile, PairObservation
from dlsched.predictors.interference.combine import combine_pairwise
from dlsched.predictors.interference.pairwise import PairwiseModel, training_sides


def _basis(u: np.ndarray, knee: float) -> np.ndarray:
    return np.column_stack([np.ones_like(u), u, np.maximum(0.0, u - knee) ** 2])


def fit_curve(u: np.ndarray, s: np.ndarray, knee: float = 100.0, relative: bool = True) -> np.ndarray:
    """Least-squares coefficients (c0, c1, c2) of the knee curve, with c2 >= 0."""
    w = 1.0 / s if relative else np.ones_like(s)
    X = _basis(u, knee) * w[:, None]
    coef = np.linalg.lstsq(X, s * w, rcond=None)[0]
    if coef[2] < 0 or not np.isfinite(coef).all():
        coef = np.append(np.linalg.lstsq(X[:, :2], s * w, rcond=None)[0], 0.0)
    return coef


class HorusCurve(PairwiseModel):
    """``s = f(u_a + u_b)``, linear to ``knee`` % then quadratic, per GPU type with a pooled fallback."""

    name = "horus-curve"

    def __init__(self, knee: float = 100.0, min_samples: int = 30, relative: bool = True) -> None:
        self.knee = knee
        self.min_samples = min_samples
        self.relative = relative

    def fit(self, pairs: Sequence[PairObservation]) -> HorusCurve:
        a, b, gpus, s = training_sides(pairs)
        if len(s) == 0:
            raise ValueError("HorusCurve.fit: no feasible pairs to learn from")
        u = np.array([x.gpu_util + y.gpu_util for x, y in zip(a, b)], dtype=float)
        known = np.isfinite(u)
        self.mean_slowdown_ = float(np.mean(s))
        self.coefs_: dict[str, tuple[float, float, float]] = {}
        self.pooled_ = (tuple(float(c) for c in fit_curve(u[known], s[known], self.knee, self.relative))
                        if known.sum() >= 3 else None)
        g = np.asarray(gpus)
        for gpu in sorted(set(gpus)):
            mask = known & (g == gpu)
            if mask.sum() >= self.min_samples:
                self.coefs_[gpu] = tuple(float(c) for c in fit_curve(u[mask], s[mask], self.knee, self.relative))
        return self

    def curve(self, u: np.ndarray | float, gpu_type: str = "") -> np.ndarray:
        """The fitted curve at cumulative utilisation ``u`` (percent) on ``gpu_type``."""
        coef = self.coefs_.get(gpu_type, self.pooled_)
        u = np.atleast_1d(np.asarray(u, dtype=float))
        if coef is None:
            return np.full(u.shape, self.mean_slowdown_)
        return _basis(u, self.knee) @ np.asarray(coef)

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        """Scalar fast path (policies call this per candidate GPU), same rule as the base class."""
        coef = self.coefs_.get(gpu_type, self.pooled_)

        def pair(o: JobProfile) -> float:
            u = a.gpu_util + o.gpu_util
            if coef is None or math.isnan(u):  # unknown utilisation
                return self.mean_slowdown_
            return coef[0] + coef[1] * u + coef[2] * max(0.0, u - self.knee) ** 2

        return combine_pairwise(pair(o) for o in others)

    def pair_slowdowns(self, a: Sequence[JobProfile], b: Sequence[JobProfile],
                       gpu_types: Sequence[str]) -> np.ndarray:
        u = np.array([x.gpu_util + y.gpu_util for x, y in zip(a, b)], dtype=float)
        out = np.full(len(u), self.mean_slowdown_)
        g = np.asarray(gpu_types, dtype=object)
        for gpu in set(gpu_types):
            mask = (g == gpu) & np.isfinite(u)
            if mask.any():
                out[mask] = self.curve(u[mask], gpu)
        return out
