"""Scores of predicted slowdowns against measured ones (pure functions on arrays).

* ``mape``/``rmse`` of s over job sides. A censored side (true s at most the recorded value)
  counts only over-prediction: its error is ``max(0, pred - true)``.
* Ranking, per job and fold: the job's measured partners ranked by the job's own predicted
  slowdown. Spearman rho (jobs with >= 3 partners; a constant prediction ranks nothing: rho 0),
  top-1 / top-3 (is the truly best partner the predicted best / among the predicted best three;
  jobs with more than 1 / 3 partners) and regret = true s with the predicted best partner minus
  the best true s (jobs with >= 2 partners). Ties in the prediction are broken uniformly at
  random *in expectation*, so a constant model scores what random pairing would.
* ``safe_auroc``: a pair is safe when both measured slowdowns are <= 1.10; the score is minus the
  larger predicted slowdown.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence

import numpy as np

SAFE_SLOWDOWN = 1.10


def errors(pred: np.ndarray, true: np.ndarray, censored: np.ndarray) -> np.ndarray:
    """Signed error per side, one-sided (over-prediction only) for censored sides."""
    err = pred - true
    return np.where(censored, np.maximum(0.0, err), err)


def mape(pred: np.ndarray, true: np.ndarray, censored: np.ndarray) -> float:
    return float(np.mean(np.abs(errors(pred, true, censored)) / true))


def rmse(pred: np.ndarray, true: np.ndarray, censored: np.ndarray) -> float:
    return float(np.sqrt(np.mean(errors(pred, true, censored) ** 2)))


def _spearman(pred: np.ndarray, true: np.ndarray) -> float:
    from scipy.stats import spearmanr

    if np.ptp(pred) == 0 or np.ptp(true) == 0:
        return 0.0
    return float(spearmanr(pred, true).statistic)


def rank_one(pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Ranking scores of one job's partners (arrays over its partners)."""
    out: dict[str, float] = {}
    n = len(pred)
    best = true.min()
    if n >= 2:
        chosen = pred == pred.min()  # the tie set a scheduler picks from at random
        out["regret"] = float(np.mean(true[chosen] - best))
        out["top1"] = float(np.mean(true[chosen] == best))
    if n >= 4:
        # chance that a truly best partner is among the first 3 when ties are ordered at random
        p_best = 0.0
        for i in np.flatnonzero(true == best):
            ahead = np.sum(pred < pred[i])
            tied = np.sum(pred == pred[i])
            p_best = max(p_best, float(np.clip((3 - ahead) / tied, 0.0, 1.0)))
        out["top3"] = p_best
    if n >= 3:
        out["spearman"] = _spearman(pred, true)
    return out


def ranking(groups: Sequence[object], pred: np.ndarray, true: np.ndarray) -> dict[str, float]:
    """Ranking scores over jobs; ``groups[i]`` names the (fold, job) that side ``i`` belongs to."""
    by: dict[object, list[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        by[g].append(i)
    per: dict[str, list[float]] = defaultdict(list)
    for idx in by.values():
        for k, v in rank_one(pred[idx], true[idx]).items():
            per[k].append(v)
    regret = np.asarray(per["regret"]) if per["regret"] else np.full(1, np.nan)
    return {"spearman": float(np.mean(per["spearman"])) if per["spearman"] else float("nan"),
            "top1": float(np.mean(per["top1"])) if per["top1"] else float("nan"),
            "top3": float(np.mean(per["top3"])) if per["top3"] else float("nan"),
            "regret_mean": float(np.mean(regret)), "regret_p95": float(np.percentile(regret, 95)),
            "jobs_ranked": len(per["regret"])}


def safe_auroc(true_a: np.ndarray, true_b: np.ndarray, pred_a: np.ndarray, pred_b: np.ndarray,
               threshold: float = SAFE_SLOWDOWN) -> float:
    """AUROC of "both slowdowns <= threshold" scored by the larger predicted slowdown (NaN when
    every pair is safe or none is)."""
    from sklearn.metrics import roc_auc_score

    safe = (true_a <= threshold) & (true_b <= threshold)
    if safe.all() or not safe.any():
        return float("nan")
    return float(roc_auc_score(safe, -np.maximum(pred_a, pred_b)))
