"""Paired comparisons of configurations run on the same replicates (seeds): every pair's mean
difference with a Bonferroni-corrected Student-t CI and a "tied" verdict, and an estimate of the
replicates a tied pair would need. Pure statistics on lists of numbers, below every harness that
compares policies (the sharing experiments' seed rule, :mod:`dlsched.experiments.sharing.pairwise`;
the sweep's tables, :mod:`dlsched.sweep.stats`, re-export it)."""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np

CORRECTION = "bonferroni"
"""The multiple-comparison correction of :func:`pairwise_paired`: each of the ``m`` pairs' CIs is
taken at level ``1 - alpha / m`` (Bonferroni), so all ``m`` intervals hold together with
probability >= ``1 - alpha``; "tied" is read off the corrected interval, so the printed interval
and the verdict always agree (Holm's step-down test would reject a little more, but gives no
intervals that match its verdicts)."""


@dataclass(frozen=True)
class PairedDifference:
    """``a - b`` paired per replicate: mean, the corrected CI, replicates, wins of ``a``, verdict."""

    a: str
    b: str
    mean: float
    low: float
    high: float
    n: int
    wins_a: int
    level: float  # the per-pair confidence level after the correction (e.g. 0.9917 for 6 pairs)
    pairs: int  # the number of comparisons corrected for

    @property
    def tied(self) -> bool:
        """The corrected CI spans 0 (or there are too few replicates for one)."""
        return not (self.low > 0 or self.high < 0)

    @property
    def verdict(self) -> str:
        if self.tied:
            return "tied"
        return f"{self.a} better" if self.mean > 0 else f"{self.b} better"

    def as_dict(self) -> dict:
        return {"a": self.a, "b": self.b, "diff": self.mean, "diff_ci_low": self.low, "diff_ci_high": self.high,
                "n": self.n, "wins_a": self.wins_a, "level": self.level, "pairs": self.pairs,
                "verdict": self.verdict}


def t_two_sided(df: int, level: float) -> float:
    """Two-sided Student's t quantile at any ``level`` (the corrected levels are not tabulated)."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df)) if df >= 1 else math.nan


def paired_difference(a: str, b: str, values_a: list[float], values_b: list[float], level: float = 0.95,
                      pairs: int = 1) -> PairedDifference:
    """``values_a - values_b`` per replicate (same order), with a Student-t CI at ``level``."""
    if len(values_a) != len(values_b) or not values_a:
        raise ValueError(f"paired difference needs equal, non-empty runs ({len(values_a)} vs {len(values_b)})")
    d = np.asarray(values_a, dtype=float) - np.asarray(values_b, dtype=float)
    n = len(d)
    mean = float(d.mean())
    wins = int((d > 0).sum())
    if n < 2:
        return PairedDifference(a, b, mean, math.nan, math.nan, n, wins, level, pairs)
    half = t_two_sided(n - 1, level) * float(d.std(ddof=1)) / math.sqrt(n)
    return PairedDifference(a, b, mean, mean - half, mean + half, n, wins, level, pairs)


def pairwise_paired(values: dict[str, list[float]], alpha: float = 0.05) -> list[PairedDifference]:
    """Every pair of ``values``' labels (in their order, ``a`` before ``b``), differences paired per
    replicate, with Bonferroni-corrected CIs (family-wise error ``alpha`` over all the pairs)."""
    labels = list(values)
    combos = list(itertools.combinations(labels, 2))
    if not combos:
        return []
    level = 1 - alpha / len(combos)
    return [paired_difference(a, b, values[a], values[b], level, len(combos)) for a, b in combos]


def replicates_needed(values_a: list[float], values_b: list[float], level: float, limit: int = 1000) -> int | None:
    """The fewest replicates at which a paired difference with this mean and spread would have a
    CI at ``level`` excluding 0 (``t(level, n-1) s / sqrt(n) < |mean|``); None when the mean is 0
    or it needs more than ``limit``. An estimate from the observed effect, not a guarantee."""
    d = np.asarray(values_a, dtype=float) - np.asarray(values_b, dtype=float)
    if len(d) < 2:
        return None
    mean, sd = abs(float(d.mean())), float(d.std(ddof=1))
    if mean == 0:
        return None
    if sd == 0:
        return 2
    for n in range(2, limit + 1):
        if t_two_sided(n - 1, level) * sd / math.sqrt(n) < mean:
            return n
    return None
