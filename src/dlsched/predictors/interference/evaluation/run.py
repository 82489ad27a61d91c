"""Run models through folds and score them: the numbers ``dlsched interference evaluate`` prints."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from dlsched.predictors.interference.base import InterferenceModel
from dlsched.predictors.interference.evaluation import metrics
from dlsched.predictors.interference.evaluation.folds import Fold
from dlsched.predictors.interference.pairwise import pair_predictions

METRICS = ("mape", "rmse", "spearman", "top1", "top3", "regret_mean", "regret_p95", "safe_auroc")


def fold_sides(model: InterferenceModel, fold: Fold) -> dict[str, np.ndarray]:
    """Test sides of one fold: the ``a`` side of every pair, then the ``b`` side (job, partner)."""
    test = fold.test
    jobs = [p.a for p in test] + [p.b for p in test]
    partners = [p.b for p in test] + [p.a for p in test]
    gpus = [p.gpu_type for p in test] * 2
    return {"pred": pair_predictions(model, jobs, partners, gpus),
            "true": np.array([p.slowdown_a for p in test] + [p.slowdown_b for p in test], dtype=float),
            "censored": np.array([p.censored_a for p in test] + [p.censored_b for p in test], dtype=bool),
            "group": np.array([f"{fold.name}|{g}|{j.key}" for g, j in zip(gpus, jobs)], dtype=object)}


def evaluate_folds(factory: Callable[[], InterferenceModel], folds: Sequence[Fold]) -> dict:
    """Fit a fresh model per fold and score the out-of-fold predictions, pooled over folds (a pair
    held out in two folds - one per model - counts in both, as the protocol defines it), with
    MAPE/RMSE also as mean and std over folds."""
    parts: list[dict[str, np.ndarray]] = []
    per_fold: dict[str, dict[str, float]] = {}
    for fold in folds:
        model = factory()
        model.fit(fold.train)
        s = fold_sides(model, fold)
        parts.append(s)
        per_fold[fold.name] = {"mape": metrics.mape(s["pred"], s["true"], s["censored"]),
                               "rmse": metrics.rmse(s["pred"], s["true"], s["censored"]), "sides": len(s["pred"])}
    pred, true, cens, group = (np.concatenate([p[k] for p in parts]) for k in ("pred", "true", "censored", "group"))
    # pair level for AUROC: the first half of each fold's sides are the a sides, the second the b sides
    halves = [(p["true"][: len(p["true"]) // 2], p["true"][len(p["true"]) // 2:],
               p["pred"][: len(p["pred"]) // 2], p["pred"][len(p["pred"]) // 2:]) for p in parts]
    ta, tb, pa, pb = (np.concatenate([h[i] for h in halves]) for i in range(4))
    fold_mape = [f["mape"] for f in per_fold.values()]
    fold_rmse = [f["rmse"] for f in per_fold.values()]
    return {"mape": metrics.mape(pred, true, cens), "rmse": metrics.rmse(pred, true, cens),
            "mape_fold_mean": float(np.mean(fold_mape)), "mape_fold_std": float(np.std(fold_mape)),
            "rmse_fold_mean": float(np.mean(fold_rmse)), "rmse_fold_std": float(np.std(fold_rmse)),
            **metrics.ranking(list(group), pred, true),
            "safe_auroc": metrics.safe_auroc(ta, tb, pa, pb), "sides": len(pred), "folds": len(folds),
            "per_fold": per_fold}
