"""The statistical protocol of the sharing experiments: every policy runs on the same seeded
workloads as a no-sharing baseline, and a policy's gain is judged **paired by seed** (the seed fixes
the jobs, so seed-to-seed variation of the workload cancels): per seed ``g = (base - x) / base``;
reported are the mean of ``g``, its 95 % confidence interval (Student's t over the seeds) and the
number of seeds on which the policy beat the baseline (``g > 0``).
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass

DEFAULT_SEEDS = 10


@dataclass(frozen=True)
class PairedGain:
    """Mean paired gain over seeds, its 95 % CI, and wins / seeds."""

    mean: float
    low: float
    high: float
    wins: int
    seeds: int

    @property
    def excludes_zero(self) -> bool:
        return self.low > 0 or self.high < 0

    def as_dict(self) -> dict[str, float]:
        return {"gain": self.mean, "gain_ci_low": self.low, "gain_ci_high": self.high,
                "wins": float(self.wins), "seeds": float(self.seeds)}


def t_quantile(df: int, level: float = 0.95) -> float:
    """Two-sided Student's t quantile for ``df`` degrees of freedom."""
    from scipy.stats import t

    return float(t.ppf(0.5 + level / 2, df))


def paired_gain(base: list[float], values: list[float]) -> PairedGain:
    """Per-seed relative reductions of ``values`` against ``base`` (same seed order)."""
    if len(base) != len(values) or not base:
        raise ValueError(f"paired gain needs equal, non-empty runs ({len(base)} vs {len(values)})")
    gains = [(b - v) / b if b else math.nan for b, v in zip(base, values)]
    n = len(gains)
    mean = statistics.fmean(gains)
    if n < 2:
        return PairedGain(mean, math.nan, math.nan, sum(g > 0 for g in gains), n)
    half = t_quantile(n - 1) * statistics.stdev(gains) / math.sqrt(n)
    return PairedGain(mean, mean - half, mean + half, sum(g > 0 for g in gains), n)


MAX_SEEDS = 1000
"""--seeds bound for the sharing experiments and reproductions: each seed is a whole workload run
per policy (Table 7 takes ~100 s a seed), so more than this is refused before any work."""


def check_seeds(n: int) -> list[int]:
    """Seeds 0..n-1, or a ValueError naming ``--seeds`` and its bounds."""
    if not 1 <= n <= MAX_SEEDS:
        raise ValueError(f"--seeds must be between 1 and {MAX_SEEDS:,} (each seed is a whole run per policy), "
                         f"got {n:,}")
    return list(range(n))
