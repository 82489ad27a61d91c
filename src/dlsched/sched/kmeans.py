"""Small seeded k-means with the L1 distance (k-medians), for grouping pending jobs.

Horus (§4.2.2) clusters pending jobs on their resource features with the L1 distance. With
L1 the centre that minimises a cluster's distance is the per-feature median, so this is
k-medians. Features are scaled to [0, 1] (min-max per column) first so that no unit (MiB vs
percent) dominates. Deterministic: the initial centres are the jobs at evenly spaced ranks of
the scaled feature sum, so the same queue always gives the same groups. At most ``iterations``
(8) refinements: queues only need coarse groups, and the pass runs at every scheduling instant.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

_ARRAYS_FROM = 16  # rows from which the refinements use numpy (below, plain Python is faster)


def l1_kmeans(features: np.ndarray, k: int, iterations: int = 8) -> np.ndarray:
    """Cluster label (0..k-1) of each row of ``features`` (n x d). Labels are renumbered by
    increasing centre sum, so label 0 is the 'smallest' group."""
    n = len(features)
    if k <= 1 or n <= 1:
        return np.zeros(n, dtype=np.int64)
    k = min(k, n)
    lo, hi = features.min(axis=0), features.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    x = (features - lo) / span
    order = np.argsort(x.sum(axis=1), kind="stable")
    centres = x[order[_spaced(n, k)]]  # fancy indexing: a copy
    if n < _ARRAYS_FROM and np.isfinite(x).all():
        labels, centres = _refine_lists(x.tolist(), centres.tolist(), iterations)
    else:
        labels, centres = _refine_arrays(x, centres, iterations)
    rank = np.argsort(np.argsort(centres.sum(axis=1), kind="stable"), kind="stable")
    return rank[labels]


def _refine_arrays(x: np.ndarray, centres: np.ndarray, iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """The refinements with numpy: labels, and the centres (``centres`` updated in place)."""
    labels = np.zeros(len(x), dtype=np.int64)
    rows = x[:, None, :]
    for it in range(iterations):
        new = _l1_distances(rows, centres).argmin(axis=1)
        if it and np.array_equal(new, labels):
            break
        labels = new
        for c in range(len(centres)):
            members = x[labels == c]
            m = len(members)
            if m:  # per-feature median (np.median's value: middle row, or mean of the two middle)
                s = np.sort(members, axis=0)
                centres[c] = s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2
    return labels, centres


def _refine_lists(rows: list[list[float]], centres: list[list[float]],
                  iterations: int) -> tuple[np.ndarray, np.ndarray]:
    """:func:`_refine_arrays` in plain Python, for a short queue (most passes), where numpy's
    per-operation overhead outweighs the work. The same floats: each distance summed feature by
    feature in order, the first nearest centre (argmin's; finite rows only), medians from the
    sorted values."""
    ks = range(len(centres))
    labels: list[int] = []
    for it in range(iterations):
        new = []
        for row in rows:
            best, least = 0, math.inf
            for c in ks:
                dist = 0.0
                for a, b in zip(row, centres[c]):
                    dist += abs(a - b)
                if dist < least:
                    best, least = c, dist
            new.append(best)
        if it and new == labels:
            break
        labels = new
        members: list[list[list[float]]] = [[] for _ in ks]
        for row, c in zip(rows, labels):
            members[c].append(row)
        centres = [_median_row(m) if m else centre for m, centre in zip(members, centres)]
    return np.array(labels, dtype=np.int64), np.array(centres)


def _median_row(rows: list[list[float]]) -> list[float]:
    """Per-feature median of ``rows``."""
    return [list_median(list(column)) for column in zip(*rows)]


def list_median(values: list[float]) -> float:
    """``float(np.median(values))`` of a non-empty list without numpy's per-call overhead (the
    same value: the middle element, or the mean of the two middle ones). Sorts ``values``."""
    values.sort()
    n = len(values)
    mid = n // 2
    if n % 2:
        return values[mid]
    return (values[mid - 1] + values[mid]) / 2


def _l1_distances(rows: np.ndarray, centres: np.ndarray) -> np.ndarray:
    """n x k L1 distances of ``rows`` (n x 1 x d) to ``centres`` (k x d), in a few array
    operations for the whole queue (it is short: per-operation overhead dominates). Summed feature
    by feature in order, not with ``sum(axis=2)``, so the floats are those of that order."""
    diff = np.abs(rows - centres)
    dist = diff[:, :, 0].copy()
    for f in range(1, diff.shape[2]):
        dist += diff[:, :, f]
    return dist


@lru_cache(maxsize=1024)
def _spaced(n: int, k: int) -> np.ndarray:
    """Ranks of the initial centres: ``k`` evenly spaced of ``n`` (kept: np.linspace is slow for
    a short queue, and the same lengths come back pass after pass). Read only."""
    out = np.linspace(0, n - 1, k).round().astype(int)
    out.flags.writeable = False
    return out
