"""How good are the QSSF duration estimates, measured the way QSSF uses them: online.

``replay`` walks a trace in time order — each job is estimated when it is submitted, and
observed when it ends (end = ``end_time`` if the job was simulated, else submit + duration,
i.e. no queueing) — so every estimate uses only jobs that ended earlier, and the GBDT is
refitted every ``refit_every`` seconds on all jobs ended so far (rolling origin: the model
used on day d was fitted on jobs that ended before day d began).

``duration_accuracy`` scores P_R, P_M, the λ blend and two trivial baselines (running global
mean; running per-GPU-count mean) on the jobs submitted after the first GBDT fit.

Both take the jobs' recorded durations from the caller (the score compares with them, and they
are what each job reveals when it ends): an estimator never reads truth, so the caller reads
them from the trace (``map(dlsched.core.truth.duration, jobs)``).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from dlsched.core.job import Job
from dlsched.predictors.duration.combined import BLENDS, merge
from dlsched.predictors.duration.features import FEATURES
from dlsched.predictors.duration.online import OnlineDurationEstimator

METHODS: tuple[str, ...] = ("global_mean", "gpu_mean", "rolling", "gbdt", "combined")


def _end(job: Job, duration: float) -> float:
    return job.end_time if job.end_time >= 0 else job.submit_time + duration


def replay(jobs: Sequence[Job], est: OnlineDurationEstimator, durations: Sequence[float],
           count_branches: bool = False) -> dict[str, Any]:
    """Run ``est`` over ``jobs`` as a simulation would (ends before submits at equal times);
    ``durations`` are the jobs' recorded durations, in ``jobs`` order.

    Returns per-job arrays (in ``jobs`` order): ``rolling``, ``gbdt``, ``combined``,
    ``global_mean``, ``gpu_mean`` (estimates, s), ``fitted`` (GBDT available at submit), and
    ``branches`` (Counter of P_R branches) when ``count_branches``.
    """
    n = len(jobs)
    if len(durations) != n:
        raise ValueError(f"replay needs one duration per job: {n} jobs, {len(durations)} durations")
    submit = np.fromiter((j.submit_time for j in jobs), dtype=np.float64, count=n)
    end = np.fromiter((_end(j, d) for j, d in zip(jobs, durations)), dtype=np.float64, count=n)
    times = np.concatenate([end, submit])
    kinds = np.concatenate([np.zeros(n, np.int8), np.ones(n, np.int8)])   # 0 = end first
    idx = np.concatenate([np.arange(n), np.arange(n)])
    order = np.lexsort((idx, kinds, times))
    out = {m: np.full(n, np.nan) for m in METHODS}
    fitted = np.zeros(n, dtype=bool)
    branches: Counter = Counter()
    g_n, g_sum = 0, 0.0
    by_gpu: dict[int, list[float]] = {}
    rolling, gbdt, combined = out["rolling"], out["gbdt"], out["combined"]
    for k in order.tolist():
        i = idx[k]
        job = jobs[i]
        t = times[k]
        if kinds[k] == 0:
            d = durations[i]
            est.observe_finished(job, t, d)
            g_n += 1
            g_sum += d
            acc = by_gpu.setdefault(job.gpus, [0, 0.0])
            acc[0] += 1
            acc[1] += d
            continue
        rolling[i], gbdt[i], combined[i] = est.estimate_parts(job, t)
        fitted[i] = est.model_ is not None
        if g_n:
            out["global_mean"][i] = g_sum / g_n
            acc = by_gpu.get(job.gpus)
            out["gpu_mean"][i] = acc[1] / acc[0] if acc else g_sum / g_n
        if count_branches:
            branches[est.rolling_.predict_branch(job)[1]] += 1
    out["fitted"] = fitted
    if count_branches:
        out["branches"] = branches
    return out


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    if len(a) < 2:
        return float("nan")
    ra = pd.Series(a).rank().to_numpy()
    rb = pd.Series(b).rank().to_numpy()
    if ra.std() == 0 or rb.std() == 0:
        return float("nan")
    return float(np.corrcoef(ra, rb)[0, 1])


def score(pred: np.ndarray, true: np.ndarray, gpus: np.ndarray) -> dict[str, float]:
    """MAE (s), median |log(1+pred) − log(1+true)|, Spearman of durations and of GPU time."""
    err = np.abs(pred - true)
    log_err = np.abs(np.log1p(np.maximum(pred, 0)) - np.log1p(np.maximum(true, 0)))
    return {
        "mae_s": float(err.mean()) if len(err) else float("nan"),
        "median_abs_log_error": float(np.median(log_err)) if len(err) else float("nan"),
        "spearman": _spearman(pred, true),
        "spearman_gpu_time": _spearman(pred * gpus, true * gpus),
    }


def informative_features(est: OnlineDurationEstimator) -> list[str]:
    """Features that actually varied in the GBDT's training data (Philly: vc, gpus, time)."""
    X = est._X[:est.n_observed]
    keep = []
    for c, name in enumerate(FEATURES):
        col = X[:, c]
        col = col[~np.isnan(col) & (col >= 0 if c < 3 else True)]
        if len(np.unique(col)) > 1:
            keep.append(name)
    return keep


def duration_accuracy(trace: Any, durations: Sequence[float], lam: float = 0.1, refit_every: float = 86400.0,
                      **estimator_kwargs: Any) -> dict[str, Any]:
    """Online accuracy report for a ``Trace`` (or a list of jobs) whose jobs recorded
    ``durations`` (in job order): see module docstring.

    ``estimator_kwargs`` go to :class:`OnlineDurationEstimator` (e.g. ``n_estimators``).
    """
    jobs = list(getattr(trace, "jobs", trace))
    origin = getattr(trace, "origin", None)
    est = OnlineDurationEstimator(refit_every=refit_every, lam=lam, origin=origin, **estimator_kwargs)
    t0 = time.perf_counter()
    durations = list(durations)
    res = replay(jobs, est, durations, count_branches=True)
    seconds = time.perf_counter() - t0
    for other in BLENDS:
        if other != est.blend:   # the other blend of the same P_R/P_M, for comparison
            res[f"combined_{other}"] = merge(res["rolling"], res["gbdt"], lam, other)
    methods = [m for m in res if m in METHODS or m.startswith("combined_")]
    mask = res["fitted"]
    true = np.array(durations, dtype=np.float64)[mask]
    gpus = np.array([j.gpus for j in jobs], dtype=np.float64)[mask]
    return {
        "trace": getattr(trace, "name", "") or "",
        "origin": origin.isoformat() if origin is not None else None,
        "jobs": len(jobs),
        "evaluated": int(mask.sum()),
        "lam": lam,
        "refit_every_s": refit_every,
        "refits": est.n_refits,
        "features": informative_features(est),
        "rolling_branches": dict(res["branches"]),
        "seconds": round(seconds, 3),
        "refit_seconds": round(est.refit_seconds, 3),
        "blend": est.blend,
        "methods": {m: score(res[m][mask], true, gpus) for m in methods},
    }
