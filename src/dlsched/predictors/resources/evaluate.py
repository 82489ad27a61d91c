"""Group cross-validation as EVALUATION.md prescribes: split by architecture, never by row;
report mean +- std over folds beside baselines. Returns plain dicts (the CLI renders them)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from dlsched.predictors.ml import metrics
from dlsched.predictors.resources.regressors import Regressor

Factory = Callable[[], Regressor]


def cross_val_predict(factory: Factory, X: np.ndarray, y: np.ndarray, folds: np.ndarray) -> np.ndarray:
    """Out-of-fold predictions: each fold is predicted by a model that never saw it."""
    pred = np.full(len(y), np.nan)
    for f in np.unique(folds):
        te = folds == f
        pred[te] = factory().fit(X[~te], y[~te]).predict(X[te])
    return pred


def _summary(per_fold: list[dict[str, float]], pooled: dict[str, float]) -> dict[str, Any]:
    out: dict[str, Any] = {"folds": len(per_fold)}
    for key in per_fold[0]:
        vals = np.array([d[key] for d in per_fold], float)
        vals = vals[~np.isnan(vals)]
        out[key] = float(vals.mean()) if len(vals) else float("nan")
        out[key + "_std"] = float(vals.std()) if len(vals) else float("nan")
    out["pooled"] = pooled
    return out


def util_scores(y: np.ndarray, pred: np.ndarray, folds: np.ndarray) -> dict[str, Any]:
    """RMSLE / MAE / Spearman per fold (mean +- std) and pooled over all out-of-fold rows."""
    per = []
    for f in np.unique(folds):
        m = folds == f
        per.append({"rmsle": metrics.rmsle(y[m], pred[m]), "mae": metrics.mae(y[m], pred[m]),
                    "spearman": metrics.spearman(y[m], pred[m]) if m.sum() > 2 else float("nan")})
    pooled = {"rmsle": metrics.rmsle(y, pred), "mae": metrics.mae(y, pred), "spearman": metrics.spearman(y, pred)}
    return _summary(per, pooled)


def mem_scores(y: np.ndarray, pred: np.ndarray, folds: np.ndarray) -> dict[str, Any]:
    """Shares under-predicted at all and by > 10 % (first: they decide), the median
    predicted/measured and MAPE, per fold (mean +- std) and pooled."""
    def scores(t: np.ndarray, p: np.ndarray) -> dict[str, float]:
        return {"under0": 100.0 * float(np.mean(p < t)), "under10": metrics.under_share(t, p),
                "median_ratio": float(np.median(p / t)), "mape": metrics.mape(t, p)}

    per = [scores(y[folds == f], pred[folds == f]) for f in np.unique(folds)]
    return _summary(per, scores(y, pred))


def evaluate_util(factories: dict[str, Factory], X: np.ndarray, util: np.ndarray, folds: np.ndarray,
                  columns: dict[str, Sequence[int]] | None = None,
                  labels: Sequence[str] | None = None) -> dict[str, dict[str, Any]]:
    """Score each regressor on log1p(util), predictions clipped to 0-100.
    ``columns[name]`` restricts a model to some feature columns (the batch-only baseline);
    ``labels`` (one per fold id) adds the RMSLE of every held-out group, to show which
    architectures carry the error."""
    z = np.log1p(util)
    return {name: score_log_predictions(util, cross_val_predict(
                fac, X[:, list(columns[name])] if columns and name in columns else X, z, folds), folds, labels)
            for name, fac in factories.items()}


def score_log_predictions(util: np.ndarray, z_pred: np.ndarray, folds: np.ndarray,
                          labels: Sequence[str] | None = None) -> dict[str, Any]:
    """:func:`util_scores` of log1p-space predictions (clipped to 0-100 %); with ``labels``
    also the RMSLE of every group."""
    pred = np.clip(np.expm1(z_pred), 0.0, 100.0)
    out = util_scores(util, pred, folds)
    if labels is not None:
        out["per_group_rmsle"] = {labels[f]: metrics.rmsle(util[folds == f], pred[folds == f])
                                  for f in np.unique(folds)}
    return out


def evaluate_memory(factories: dict[str, Factory], X: np.ndarray, mem: np.ndarray,
                    folds: np.ndarray) -> dict[str, dict[str, Any]]:
    """Score each memory estimator (MiB in, MiB out) with group folds."""
    return {name: mem_scores(mem, cross_val_predict(fac, X, mem, folds), folds) for name, fac in factories.items()}
