"""Small seeded k-means with the L1 distance (k-medians), for grouping pending jobs.

Horus (§4.2.2) clusters pending jobs on their resource features with the L1 distance. With
L1 the centre that minimises a cluster's distance is the per-feature median, so this is
k-medians. Features are scaled to [0, 1] (min-max per column) first so that no unit (MiB vs
percent) dominates. Deterministic: the initial centres are the jobs at evenly spaced ranks of
the scaled feature sum, so the same queue always gives the same groups. At most ``iterations``
(8) refinements: queues only need coarse groups, and the pass runs at every scheduling instant.
"""

from __future__ import annotations

import numpy as np


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
    centres = x[order[np.linspace(0, n - 1, k).round().astype(int)]].copy()
    labels = np.zeros(n, dtype=np.int64)
    cols = [np.ascontiguousarray(x[:, f]) for f in range(x.shape[1])]
    dist = np.empty((n, k))
    for it in range(iterations):
        # L1 distance to each centre, summed feature by feature in order (the same floats as
        # np.abs(x[:, None] - centres[None]).sum(axis=2), without the n x k x d temporary)
        for c in range(k):
            d = np.abs(cols[0] - centres[c, 0])
            for f in range(1, len(cols)):
                d += np.abs(cols[f] - centres[c, f])
            dist[:, c] = d
        new = dist.argmin(axis=1)
        if it and np.array_equal(new, labels):
            break
        labels = new
        for c in range(k):
            members = x[labels == c]
            m = len(members)
            if m:  # per-feature median (np.median's value: middle row, or mean of the two middle)
                s = np.sort(members, axis=0)
                centres[c] = s[m // 2] if m % 2 else (s[m // 2 - 1] + s[m // 2]) / 2
    rank = np.argsort(np.argsort(centres.sum(axis=1), kind="stable"), kind="stable")
    return rank[labels]
