"""Forecast error metrics, defined once so the CLI, tests and benchmark agree."""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _pair(actual: ArrayLike, predicted: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    a, p = np.asarray(actual, dtype=float), np.asarray(predicted, dtype=float)
    if a.shape != p.shape or a.size == 0:
        raise ValueError(f"need two non-empty arrays of the same shape, got {a.shape} and {p.shape}")
    return a, p


def smape(actual: ArrayLike, predicted: ArrayLike) -> float:
    """Symmetric MAPE in percent: mean of 2|p - a| / (|a| + |p|) × 100 (0/0 counts as 0).

    This is the form the Helios paper cites (range 0-200 %); the reference's 5.29 % is on it.
    """
    a, p = _pair(actual, predicted)
    den = np.abs(a) + np.abs(p)
    ratio = np.divide(2.0 * np.abs(p - a), den, out=np.zeros_like(den), where=den > 0)
    return float(100.0 * ratio.mean())


def rmse(actual: ArrayLike, predicted: ArrayLike) -> float:
    """Root mean squared error, in nodes."""
    a, p = _pair(actual, predicted)
    return float(np.sqrt(np.mean((p - a) ** 2)))
