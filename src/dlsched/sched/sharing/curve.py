"""The Horus slowdown curve f(cumulative GPU utilisation) of Eq. 9 (Horus §3.2, §4.2.1).

Horus fits JCT slowdown against the cumulative utilisation ``U`` (percent) of a GPU's jobs:
linear while ``U <= 100`` (``f-``), quadratic once the GPU is over-committed (``f+``). The paper
publishes only the quadratic fits (footnotes 3-4, ``x = U / 100``, slowdown as the fraction
``T_deg`` of Eq. 1): GTX 1080 ``1.32198 x^2 - 0.00728 x + 6e-5`` and RTX 2080
``1.16664 x^2 - 0.00302 x + 4e-5``. For ``f-`` we take the straight line from (0, 0) to
``f+(1)`` so the curve is continuous at 100 % -- the paper says only that it is linear. A curve
fitted to measured pairs (``predictors/interference``) can replace it: any callable of ``U``.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class HorusCurve2080:
    """Eq. 9 with the paper's RTX 2080 fit (its testbed GPU); returns ``T_deg`` (0 = no slowdown)."""

    a: float = 1.16664
    b: float = -0.00302
    c: float = 4e-5

    def over(self, x: float) -> float:
        return self.a * x * x + self.b * x + self.c

    def __call__(self, cumulative_util: float) -> float:
        x = cumulative_util / 100.0
        if x > 1.0:
            return self.over(x)
        return self.over(1.0) * x

    def vector(self, cumulative_util):
        """``self(U)`` of each element of an array, with the same float operations."""
        import numpy as np

        x = cumulative_util / 100.0
        return np.where(x > 1.0, self.a * x * x + self.b * x + self.c, self.over(1.0) * x)


PAPER_CURVE = HorusCurve2080()


class CurveSlowdown:
    """An :class:`~dlsched.predictors.interference.base.InterferenceModel` from a curve of
    cumulative utilisation: ``slowdown = 1 + f(u_a + sum(u_others))`` (Horus's proxy: the
    utilisation a GPU's jobs add up to predicts how much they slow each other). The default
    model of the pairing policies when no fitted one is given."""

    def __init__(self, curve=PAPER_CURVE) -> None:
        self.curve = curve
        self.name = "horus-paper-curve"

    def fit(self, pairs) -> CurveSlowdown:
        return self

    def slowdown(self, a, others, gpu_type: str = "") -> float:
        if not others:
            return 1.0
        total = _util(a.gpu_util) + sum(_util(o.gpu_util) for o in others)
        return 1.0 + self.curve(total)


def _util(u: float) -> float:
    return u if u == u else 100.0
