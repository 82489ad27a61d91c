"""The memory tables of EVALUATION.md on the GPUMemNet (ITU) data: TIMM (5-fold by family),
synthetic MLPs (train depth <= 5, test deeper) and the Horus-formula MLP set."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dlsched.predictors.ml import metrics
from dlsched.predictors.ml.folds import stable_fold
from dlsched.predictors.resources import profiles
from dlsched.predictors.resources.evaluate import evaluate_memory, mem_scores
from dlsched.predictors.resources.memory import (
    FakeTensorBaseline,
    FakeTensorMemoryEstimator,
    HorusEq2Estimator,
    LinearMemoryEstimator,
)

K_FOLDS = 5


def timm_table(path: Path, n_estimators: int = 300) -> dict[str, Any]:
    """TIMM: censored (>= 40 GB) and failed runs excluded; folds by family prefix."""
    df = profiles.load_timm_memory(path)
    keep = ~df["censored"] & ~df["failed"]
    d = df[keep].reset_index(drop=True)
    X = d[["fake_last_mib", "fake_fwd_mib", "fake_bwd_mib", "batch"]].to_numpy(float)
    y = d["mem_mib"].to_numpy(float)
    folds = d["family"].map(lambda s: stable_fold(s, K_FOLDS)).to_numpy()
    res = evaluate_memory({
        "faketensor": FakeTensorBaseline,
        "faketensor+1GiB": lambda: _Shift(1024.0),
        "faketensor_lgbm_q0.5": lambda: FakeTensorMemoryEstimator(alpha=0.5, n_estimators=n_estimators),
        "faketensor_lgbm_q0.8": lambda: FakeTensorMemoryEstimator(alpha=0.8, n_estimators=n_estimators),
    }, X, y, folds)
    info = {"rows": len(d), "excluded_censored": int(df["censored"].sum()),
            "excluded_failed": int(df["failed"].sum()), "families": int(d["family"].nunique()), "folds": K_FOLDS}
    return {"info": info, "estimators": res}


class _Shift(FakeTensorBaseline):
    """FakeTensor plus a constant CUDA-context allowance (a fairer naive baseline)."""

    kind = "faketensor_shift"

    def __init__(self, shift_mib: float = 1024.0, seed: int = 0) -> None:
        self.shift_mib = shift_mib
        self.seed = seed

    def predict(self, X: Any) -> np.ndarray:
        return super().predict(X) + self.shift_mib


def mlp_table(path: Path) -> dict[str, Any]:
    """GPUMemNet MLPs: the graph-feature estimators; train on depth <= 5, test on deeper."""
    d = profiles.load_mlp_memory(path)
    X = d[["param_mib", "act_mib_per_sample", "batch"]].to_numpy(float)
    y = d["mem_mib"].to_numpy(float)
    folds = (d["depth"] > 5).astype(int).to_numpy()
    test = folds == 1
    out: dict[str, Any] = {"info": {"rows_train": int((~test).sum()), "rows_test": int(test.sum())},
                           "estimators": {}}
    for name, est in {"horus_eq2": HorusEq2Estimator(), "horus_eq2+1000MiB": HorusEq2Estimator(delta_mib=1000.0),
                      "prior (no fit)": LinearMemoryEstimator.prior(),
                      "linear_q0.5": LinearMemoryEstimator(quantile=0.5),
                      "linear_q0.9": LinearMemoryEstimator(quantile=0.9)}.items():
        pred = (est if name.startswith("prior") else est.fit(X[~test], y[~test])).predict(X[test])
        out["estimators"][name] = {"mape": metrics.mape(y[test], pred), "under10": metrics.under_share(y[test], pred)}
    return out


def horus_mlp_table(path: Path, mlp_path: Path | None = None) -> dict[str, Any]:
    """The Horus formula exactly as GPUMemNet ran it on FC nets (its column, GiB*1000 -> MiB),
    beside our estimators; the fitted one is trained on the *other* MLP set (transfer test).
    FC nets on MNIST: P = 785n + (L-1)(n^2+n) + 10n + 10, A = nL + 10 per sample, batch 32
    (these reproduce GPUMemNet's formula column exactly)."""
    d = profiles.load_horus_mlp(path)
    y = d["mem_mib"].to_numpy(float)
    n, L = d["neurons"].to_numpy(float), d["layers"].to_numpy(float)
    params = 785 * n + (L - 1) * (n * n + n) + 10 * n + 10
    X = np.c_[params * 4 / 2**20, (n * L + 10) * 4 / 2**20, np.full(len(d), 32.0)]
    preds = {"horus_eq2": d["horus_mib"].to_numpy(float) * 1.024}
    preds["horus_eq2+1000MiB"] = preds["horus_eq2"] + 1000
    preds["prior (no fit)"] = LinearMemoryEstimator.prior().predict(X)
    if mlp_path is not None:
        m = profiles.load_mlp_memory(mlp_path)
        fit = LinearMemoryEstimator(quantile=0.9).fit(
            m[["param_mib", "act_mib_per_sample", "batch"]].to_numpy(float), m["mem_mib"].to_numpy(float))
        preds["linear_q0.9 (fit on GPUMemNet MLPs)"] = fit.predict(X)
    return {"info": {"rows": len(d)}, "estimators": {
        k: {"mape": metrics.mape(y, p), "under10": metrics.under_share(y, p)} for k, p in preds.items()}}


def memory_report(shared: Path, n_estimators: int = 300) -> dict[str, Any]:
    """All memory tables whose files exist under ``shared/profiles/itu_gpumem``."""
    base = shared / "profiles" / "itu_gpumem"
    tables: dict[str, Any] = {}
    mlp = base / "gpumemnet_mlp_data_step2.csv.gz"
    if (p := base / "timm_faketensor_vs_measured_memory.csv").is_file():
        tables["group_kfold"] = timm_table(p, n_estimators)
    if mlp.is_file():
        tables["mlp_depth_split"] = mlp_table(mlp)
    if (p := base / "horus_memory_formula_vs_measured_mlp.csv").is_file():
        tables["horus_mlp"] = horus_mlp_table(p, mlp if mlp.is_file() else None)
    out: dict[str, Any] = {}
    for name, table in tables.items():  # flat: memory.<table>.<estimator>.mape
        out[name] = table["estimators"]
        out[name + "_info"] = table["info"]
    return out


__all__ = ["horus_mlp_table", "mem_scores", "memory_report", "mlp_table", "timm_table"]
