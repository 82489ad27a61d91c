"""Error metrics used by EVALUATION.md, in plain numpy so evaluation needs no scipy."""

from __future__ import annotations

import numpy as np


def rmsle(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Root mean squared log error; penalises under-prediction of small values more (Horus's metric)."""
    t = np.log1p(np.clip(np.asarray(y_true, float), 0, None))
    p = np.log1p(np.clip(np.asarray(y_pred, float), 0, None))
    return float(np.sqrt(np.mean((p - t) ** 2)))


def mae(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean absolute error in the target's own unit (utilisation points)."""
    return float(np.mean(np.abs(np.asarray(y_pred, float) - np.asarray(y_true, float))))


def _ranks(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share the mean rank), as Spearman's rho requires."""
    x = np.asarray(x, float)
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x))
    ranks[order] = np.arange(len(x), dtype=float)
    _, inv, counts = np.unique(x, return_inverse=True, return_counts=True)
    sums = np.bincount(inv, weights=ranks)
    return sums[inv] / counts[inv]


def spearman(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Spearman rank correlation; NaN when either side is constant (rank undefined)."""
    a, b = _ranks(y_true), _ranks(y_pred)
    if a.std() == 0 or b.std() == 0:
        return float("nan")
    return float(np.corrcoef(a, b)[0, 1])


def mape(y_true: np.ndarray, y_pred: np.ndarray) -> float:
    """Mean absolute percentage error, in percent."""
    t = np.asarray(y_true, float)
    return float(np.mean(np.abs(np.asarray(y_pred, float) - t) / t) * 100.0)


def under_share(y_true: np.ndarray, y_pred: np.ndarray, tol: float = 0.10) -> float:
    """Percent of rows predicted more than ``tol`` below the truth: each such job would OOM."""
    t = np.asarray(y_true, float)
    return float(np.mean(np.asarray(y_pred, float) < (1.0 - tol) * t) * 100.0)
