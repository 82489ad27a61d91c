"""Downsampling so plots stay fast and PNGs small whatever the size of the run.

A CDF keeps evenly spaced quantiles plus both extremes; a step series (a timeline that changes at
events) is reduced to time-weighted means over equal bins, which preserves its average — the
utilisation figure a reader compares against summary.json.
"""

from __future__ import annotations

import numpy as np

MAX_POINTS = 2000


def cdf_points(values: np.ndarray, max_points: int = MAX_POINTS) -> tuple[np.ndarray, np.ndarray]:
    """Empirical CDF (x sorted, y in (0, 1]) with at most ``max_points`` points."""
    xs = np.sort(np.asarray(values, dtype=float))
    n = xs.size
    if n == 0:
        return xs, xs
    if n <= max_points:
        idx = np.arange(n)
    else:
        idx = np.unique(np.linspace(0, n - 1, max_points).round().astype(np.int64))
    return xs[idx], (idx + 1) / n


def step_means(
    times: np.ndarray, values: np.ndarray, start: float, end: float, bins: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean of a step series over ``bins`` equal bins of [start, end].

    ``values[i]`` holds from ``times[i]`` until the next time; before the first time the first
    value holds and after the last one the last value holds. Returns (bin centres, means).
    """
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(t) & np.isfinite(v)
    t, v = t[keep], v[keep]
    if t.size == 0 or not end > start:
        return np.empty(0), np.empty(0)
    order = np.argsort(t, kind="stable")
    t, v = t[order], v[order]
    knots = np.concatenate(([min(start, t[0])], t, [max(end, t[-1])]))
    levels = np.concatenate(([v[0]], v))
    area = np.concatenate(([0.0], np.cumsum(levels * np.diff(knots))))
    edges = np.linspace(start, end, bins + 1)
    means = np.diff(np.interp(edges, knots, area)) / np.diff(edges)
    return (edges[:-1] + edges[1:]) / 2, means


def reduce_steps(
    times: np.ndarray, values: np.ndarray, start: float, end: float, max_points: int = MAX_POINTS
) -> tuple[np.ndarray, np.ndarray, bool]:
    """Raw steps when small enough (flag True: draw as steps), else binned means (flag False)."""
    t = np.asarray(times, dtype=float)
    v = np.asarray(values, dtype=float)
    keep = np.isfinite(t) & np.isfinite(v)
    if keep.sum() <= max_points:
        return t[keep], v[keep], True
    x, y = step_means(t[keep], v[keep], start, end, max_points)
    return x, y, False
