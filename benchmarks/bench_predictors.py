"""Latency of one prediction (utilisation + memory) per regressor; the budget is 1 ms.

    python benchmarks/bench_predictors.py
"""

from __future__ import annotations

import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.default import load_default
from dlsched.predictors.resources.features import vectorize
from dlsched.predictors.resources.memory import LinearMemoryEstimator
from dlsched.predictors.resources.train import ALL_UTIL_FEATURES, features_for, util_factories

BUDGET_S = 1e-3


def _features(rng: np.random.Generator) -> dict[str, float]:
    f = {k: float(rng.uniform(1, 1e9)) for k in ALL_UTIL_FEATURES}
    f.update(batch=float(rng.choice([16, 32, 64, 128])), amp=0.0)
    return f


def _time(pred: Predictor, feats: dict[str, float], reps: int = 2000) -> float:
    for _ in range(50):  # warm-up
        pred.predict_util(feats, "V100"), pred.predict_mem_mib(feats, "V100")
    t0 = time.perf_counter()
    for _ in range(reps):
        pred.predict_util(feats, "V100")
        pred.predict_mem_mib(feats, "V100")
    return (time.perf_counter() - t0) / reps


def main() -> None:
    rng = np.random.default_rng(0)
    rows = [_features(rng) for _ in range(200)]
    z = np.log1p(rng.uniform(5, 100, len(rows)))
    mem = LinearMemoryEstimator.prior()
    results = {}
    default = load_default()
    if default is not None:
        results["shipped default"] = _time(default, rows[0])
    for name, fac in util_factories(n_estimators=300).items():
        names = features_for(name)
        results[name] = _time(Predictor(fac().fit(vectorize(rows, names), z), names, mem), rows[0], reps=500)
    worst = max(results.values())
    for name, sec in results.items():
        print(f"{name:16s} {sec * 1e6:8.1f} us per prediction (util + memory)")
    print(f"worst {worst * 1e3:.3f} ms; budget {BUDGET_S * 1e3:.0f} ms: {'OK' if worst <= BUDGET_S else 'OVER'}")


if __name__ == "__main__":
    main()
