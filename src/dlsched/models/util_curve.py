"""The ground truth's answer for pairs nobody measured: slowdown as a function of the pair's
cumulative utilisation (the Horus curve's form, §4.2: linear up to 100 %, quadratic beyond),
fitted per GPU type on the measured pairs of a :class:`~dlsched.models.colocation_table.ColocationTable`.

``s(U) = c0 + c1 U + c2 max(U - 100, 0)^2`` with ``U = u_a + u_b`` (percent), least squares,
never below 1. A GPU type with fewer than ``min_pairs`` measured pairs uses the fit on all pairs.
This is the engine's fallback (truth side); the interference models a policy uses live in
:mod:`dlsched.predictors.interference`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import JobProfile, PairObservation


def _design(u: np.ndarray) -> np.ndarray:
    return np.column_stack([np.ones_like(u), u, np.maximum(u - 100.0, 0.0) ** 2])


class UtilSumCurve:
    """Slowdown from cumulative utilisation, one curve per GPU type (scikit-learn style)."""

    name = "util-sum-curve"

    def __init__(self, min_pairs: int = 10) -> None:
        self.min_pairs = min_pairs

    def fit(self, pairs: Sequence[PairObservation]) -> UtilSumCurve:
        groups: dict[str, list[tuple[float, float]]] = {}
        for p in pairs:
            u = p.a.gpu_util + p.b.gpu_util
            if math.isnan(u):
                continue
            for s in (p.slowdown_a, p.slowdown_b):
                if np.isfinite(s):
                    groups.setdefault(p.gpu_type, []).append((u, s))
                    groups.setdefault("*", []).append((u, s))
        if "*" not in groups:
            raise ValueError("no measured pair with known utilisations to fit the curve on")
        self.coef_ = {g: self._fit(rows) for g, rows in groups.items()
                      if g == "*" or len(rows) >= 2 * self.min_pairs}
        return self

    @staticmethod
    def _fit(rows: list[tuple[float, float]]) -> np.ndarray:
        u, s = np.array(rows).T
        coef, *_ = np.linalg.lstsq(_design(u), s, rcond=None)
        return coef

    def slowdown(self, a: JobProfile, others: Sequence[JobProfile], gpu_type: str = "") -> float:
        """Slowdown of ``a`` beside ``others``: the curve at their summed utilisation."""
        if not others:
            return 1.0
        u = a.gpu_util + sum(o.gpu_util for o in others)
        c = self.coef_.get(gpu_type, self.coef_["*"])
        return max(1.0, float(c[0] + c[1] * u + c[2] * max(u - 100.0, 0.0) ** 2))
