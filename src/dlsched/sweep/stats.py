"""Across-seed statistics of a sweep: mean, 95 % confidence interval, ratio to a baseline cell.

Cells that differ only in the replicate option (``seed`` unless the spec says otherwise) are
repetitions of one configuration. For every numeric figure the table has ``FIG.mean``,
``FIG.ci95`` (half-width of the Student-t interval of the mean; empty with one repetition) and,
with a baseline, ``FIG.ratio`` = mean / the baseline configuration's mean, where the baseline
configuration is the one equal to this row except for the baseline's keys (e.g. the same cluster
size and load with ``policy=fifo``).

:func:`pairwise_paired` compares every pair of configurations paired per replicate, with
Bonferroni-corrected CIs and a "tied" verdict; :func:`replicates_needed` estimates the replicates a
tied pair would need (the sharing experiments' seed rule, :mod:`dlsched.experiments.sharing.pairwise`).
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd

# the paired comparisons live below the harnesses that use them; re-exported as the sweep's API
from dlsched.metrics.paired import (  # noqa: F401
    CORRECTION,
    PairedDifference,
    paired_difference,
    pairwise_paired,
    replicates_needed,
    t_two_sided,
)

# two-sided 95 % Student-t quantiles t(0.975, df), df = 1..30, then 40, 60, 120, infinity
_T95 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
        2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
        2.045, 2.042)
_T95_TAIL = ((40, 2.021), (60, 2.000), (120, 1.980))

NOT_FIGURES = frozenset({"cell", "status", "error"})


def t95(df: int) -> float:
    """t(0.975, df); between tabulated degrees of freedom, linear in 1/df (exact to 3 decimals)."""
    if df < 1:
        return math.nan
    if df <= len(_T95):
        return _T95[df - 1]
    points = [(30, _T95[-1]), *_T95_TAIL, (math.inf, 1.960)]
    for (d0, t0), (d1, t1) in itertools.pairwise(points):
        if df <= d1:
            x, x0, x1 = 1 / df, 1 / d0, (0.0 if d1 == math.inf else 1 / d1)
            return t1 + (t0 - t1) * (x - x1) / (x0 - x1)
    return 1.960


def ci95(values: np.ndarray) -> float:
    """Half-width of the 95 % confidence interval of the mean (NaN below two values)."""
    values = values[~np.isnan(values)]
    n = len(values)
    if n < 2:
        return math.nan
    return t95(n - 1) * float(np.std(values, ddof=1)) / math.sqrt(n)


def figure_columns(table: pd.DataFrame, params: list[str]) -> list[str]:
    """Numeric columns that are results, not parameters."""
    return [c for c in table.columns if c not in params and c not in NOT_FIGURES
            and pd.api.types.is_numeric_dtype(table[c]) and not pd.api.types.is_bool_dtype(table[c])]


def seed_stats(table: pd.DataFrame, params: list[str], replicate: str = "seed",
               baseline: dict | None = None) -> tuple[pd.DataFrame, int]:
    """One row per configuration (``params`` minus ``replicate``) of the finished cells.

    Returns the table and how many configurations have no baseline to divide by."""
    done = table[table["status"] == "done"] if "status" in table else table
    keys = [p for p in params if p != replicate and p in done.columns]
    figures = figure_columns(done, params)
    rows = []
    groups = done.groupby(keys, sort=False, dropna=False) if keys else [((), done)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        row: dict[str, object] = dict(zip(keys, key))
        row["n"] = len(group)
        for fig in figures:
            values = group[fig].to_numpy(dtype=float)
            row[f"{fig}.mean"] = float(np.nanmean(values)) if not np.isnan(values).all() else math.nan
            row[f"{fig}.ci95"] = ci95(values)
        rows.append(row)
    stats = pd.DataFrame(rows)
    missing = 0
    if baseline:
        unknown = [k for k in baseline if k not in keys]
        if unknown:
            raise ValueError(f"--baseline: {', '.join(unknown)} is not a parameter of this sweep "
                             f"(parameters: {', '.join(keys) or 'none'})")
        base_rows = stats
        for k, v in baseline.items():
            base_rows = base_rows[base_rows[k].map(repr) == repr(v)]
        if base_rows.empty:
            raise ValueError(f"--baseline {_text(baseline)}: no finished cell has these values")
        others = [k for k in keys if k not in baseline]
        index = {tuple(repr(r[k]) for k in others): r for _, r in base_rows.iterrows()}
        ratios: dict[str, list[float]] = {f"{fig}.ratio": [] for fig in figures}
        for _, r in stats.iterrows():
            ref = index.get(tuple(repr(r[k]) for k in others))
            missing += ref is None
            for fig in figures:
                num, den = r[f"{fig}.mean"], (ref[f"{fig}.mean"] if ref is not None else math.nan)
                ratios[f"{fig}.ratio"].append(num / den if den and not math.isnan(den) else math.nan)
        stats = pd.concat([stats, pd.DataFrame(ratios, index=stats.index)], axis=1)
    return stats, missing


def _text(options: dict) -> str:
    return ",".join(f"{k}={v}" for k, v in options.items())
