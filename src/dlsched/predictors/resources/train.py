"""Training pipeline: profile table -> graph features -> evaluated, saved predictor."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsched.predictors.ml.folds import lucid_family
from dlsched.predictors.resources import evaluate, util_evidence
from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.calibration import GpuCalibration
from dlsched.predictors.resources.features import UTIL_FEATURES, mem_inputs, vectorize
from dlsched.predictors.resources.gpu_specs import (
    APRIORI_HOST_CONSTANTS,
    DEFAULT_GPU,
    datasheet_constants,
    device_constants,
)
from dlsched.predictors.resources.graph_source import Resolver, graph_features
from dlsched.predictors.resources.memory import LinearMemoryEstimator
from dlsched.predictors.resources.persist import sha256_files
from dlsched.predictors.resources.profiles import load_util_profiles
from dlsched.predictors.resources.regressors import (
    DummyRegressor,
    ForestRegressor,
    LGBMRegressor,
    LinearRegressor,
    Regressor,
    XGBRegressor,
)
from dlsched.predictors.resources.roofline import ROOFLINE_FEATURES, RooflineRegressor

RANDOM_SPLIT_FOLDS = 5


#: regressors that use a subset of UTIL_FEATURES (the rest use all of them)
FEATURE_SETS: dict[str, tuple[str, ...]] = {
    "batch_linear": ("batch", "amp"),
    "robust_linear": ("flops_per_step", "amp", "batch"),
    "roofline": ROOFLINE_FEATURES,
    "host_roofline": ROOFLINE_FEATURES,
}
#: every column any regressor reads, in a fixed order
ALL_UTIL_FEATURES: tuple[str, ...] = UTIL_FEATURES + tuple(
    dict.fromkeys(f for fs in FEATURE_SETS.values() for f in fs if f not in UTIL_FEATURES))


def features_for(regressor: str) -> tuple[str, ...]:
    return FEATURE_SETS.get(regressor, UTIL_FEATURES)


def util_factories(n_estimators: int = 300, seed: int = 0) -> dict[str, evaluate.Factory]:
    """The compared regressors; ``n_estimators`` is kept small in tests. Baselines first:
    the training mean and a batch-size-only linear model (EVALUATION.md)."""
    return {
        "dummy_mean": lambda: DummyRegressor(seed=seed),
        "batch_linear": lambda: LinearRegressor(alpha=1.0, seed=seed),
        "linear": lambda: LinearRegressor(alpha=3.0, seed=seed),
        "robust_linear": lambda: LinearRegressor(alpha=0.1, loss="huber", epsilon=1.1, seed=seed),
        "random_forest": lambda: ForestRegressor(n_estimators=n_estimators, min_samples_leaf=2,
                                                 max_features=0.5, seed=seed),
        "xgboost": lambda: XGBRegressor(n_estimators=n_estimators, max_depth=3, learning_rate=0.05, seed=seed),
        "lightgbm": lambda: LGBMRegressor(n_estimators=n_estimators, num_leaves=4, min_child_samples=3,
                                          learning_rate=0.05, seed=seed),
        "roofline": lambda: RooflineRegressor(seed=seed),
        # data-sheet device constants (V100), only the four host constants fitted: what the
        # shipped default is, so its leave-one-model-out score is the default's honest score
        "host_roofline": lambda: RooflineRegressor(seed=seed, fixed=device_constants(DEFAULT_GPU)),
    }


def feature_rows(profiles: pd.DataFrame, resolver: Resolver = graph_features) -> list[dict[str, float]]:
    """Graph features of every profile row, plus its ``amp`` flag."""
    rows = []
    for r in profiles.itertuples(index=False):
        f = dict(resolver(r.model, int(r.batch), r.onnx))
        f["amp"] = float(r.amp)
        rows.append(f)
    return rows


def util_report(profiles: pd.DataFrame, rows: list[dict[str, float]], n_estimators: int = 300,
                seed: int = 0) -> dict[str, Any]:
    """Leave-one-model-out, leave-one-family-out and (leaky, for comparison) random splits."""
    X = vectorize(rows, ALL_UTIL_FEATURES)
    y = profiles["gpu_util"].to_numpy(float)
    models = profiles["model"].to_numpy()
    model_ids, model_names = pd.factorize(models)
    family_ids, family_names = pd.factorize(np.array([lucid_family(m) for m in models]))
    splits = {
        "leave_one_model_out": (model_ids, list(model_names)),
        "leave_one_family_out": (family_ids, list(family_names)),
        "random_split": (np.random.default_rng(seed).permutation(len(y)) % RANDOM_SPLIT_FOLDS, None),
    }
    facs = util_factories(n_estimators, seed)
    columns = {name: [ALL_UTIL_FEATURES.index(f) for f in features_for(name)] for name in facs}
    roof_cols = columns["roofline"]
    constants = RooflineRegressor(seed=seed).fit(X[:, roof_cols], np.log1p(y)).constants()
    host = facs["host_roofline"]().fit(X[:, roof_cols], np.log1p(y)).constants()
    report = {name: evaluate.evaluate_util(facs, X, y, folds, columns, labels)
              for name, (folds, labels) in splits.items()}
    lomo = report["leave_one_model_out"]
    # The shipped default is host_roofline fitted on all rows (gpu_specs.HOST_CONSTANTS), so its
    # honest score is host_roofline's: each held-out model was left out of the host fit.
    lomo["datasheet_roofline"] = dict(lomo["host_roofline"], note=(
        "shipped default: V100 data-sheet device constants + host constants fitted on Lucid; "
        "scored with the held-out model left out of the host fit (= host_roofline)"))
    # the first, a-priori host guess, fitted to nothing: every split scores it the same
    lomo["datasheet_apriori"] = evaluate.score_log_predictions(
        y, RooflineRegressor.from_constants(**datasheet_constants(DEFAULT_GPU, APRIORI_HOST_CONSTANTS)).predict(
            X[:, roof_cols]), *splits["leave_one_model_out"])
    # why the ranking fails where it does: the default's pooled rho with each model left out, and
    # (where the table has throughputs) each model's GPU-busy and idle time per sample
    default_oof = np.clip(np.expm1(evaluate.cross_val_predict(facs["host_roofline"], X[:, roof_cols], np.log1p(y),
                                                              model_ids)), 0.0, 100.0)
    evidence = {"rho_without": util_evidence.rho_without(y, default_oof, models),
                "per_model_evidence": util_evidence.busy_idle(profiles, rows)}
    return report | evidence | {
        "rows": len(y), "models": len(set(models)), "features": list(UTIL_FEATURES),
        "roofline_constants": constants,
        "host_constants": {k: host[k] for k in ("kernel_floor_s", "launch_s", "step_s", "overlap_q")}}


def _band(residuals: np.ndarray, lo: float = 10, hi: float = 90) -> tuple[float, float]:
    return float(np.percentile(residuals, lo)), float(np.percentile(residuals, hi))


def fit_predictor(profiles: pd.DataFrame, rows: list[dict[str, float]], regressor: str = "random_forest",
                  n_estimators: int = 300, seed: int = 0) -> tuple[Predictor, dict[str, Any]]:
    """Fit the chosen regressor on all rows. Intervals and per-GPU calibration come from
    leave-one-model-out predictions, i.e. from errors on architectures the model had not seen."""
    facs = util_factories(n_estimators, seed)
    if regressor not in facs:
        raise ValueError(f"unknown regressor {regressor!r}; choose from {', '.join(facs)}")
    names = features_for(regressor)
    X = vectorize(rows, names)
    y = profiles["gpu_util"].to_numpy(float)
    z = np.log1p(y)
    folds = pd.factorize(profiles["model"].to_numpy())[0]
    oof = evaluate.cross_val_predict(facs[regressor], X, z, folds) if len(set(folds)) > 1 else z
    model: Regressor = facs[regressor]().fit(X, z)
    # Per-GPU correction from out-of-fold predictions; only for named GPU types (a table
    # without a ``gpu`` column has no type to correct for).
    named = profiles["gpu"].str.lower().ne("unknown").to_numpy()
    calib = GpuCalibration().fit(np.expm1(oof[named]), y[named], profiles["gpu"].to_numpy()[named])
    info: dict[str, Any] = {"util_regressor": regressor}

    mem_model, mem_band = None, (0.8, 1.1)
    gmem = profiles["gmem"].to_numpy(float)
    if np.isfinite(gmem).all():
        M = np.asarray([mem_inputs(r) for r in rows])
        mem_oof = evaluate.cross_val_predict(lambda: LinearMemoryEstimator(quantile=0.9), M, gmem, folds)
        mem_model = LinearMemoryEstimator(quantile=0.9).fit(M, gmem)
        mem_band = _band(gmem / mem_oof)
        info["memory_lomo"] = evaluate.mem_scores(gmem, mem_oof, folds)["pooled"]
    pred = Predictor(util_model=model, util_features=names, mem_model=mem_model,
                     calibration=calib, util_band=_band(z - oof), mem_band=mem_band)
    return pred, info


def best_regressor(report: dict[str, Any]) -> str:
    """The learned regressor with the lowest leave-one-model-out RMSLE (fold mean)."""
    lomo = report["leave_one_model_out"]
    learned = [k for k in lomo if k not in ("dummy_mean", "batch_linear", "datasheet_roofline", "datasheet_apriori")]
    return min(learned, key=lambda k: lomo[k]["rmsle"])


def train(profiles_path: str | Path, out_dir: str | Path, regressor: str = "auto",
          n_estimators: int = 300, seed: int = 0, resolver: Resolver = graph_features,
          license_note: str = "") -> tuple[Path, dict[str, Any]]:
    """``dlsched predictor train``: read, featurise, evaluate (LOMO), fit, save with manifest."""
    profiles = load_util_profiles(profiles_path)
    rows = feature_rows(profiles, resolver)
    report = util_report(profiles, rows, n_estimators, seed)
    if regressor == "auto":
        regressor = best_regressor(report)
    pred, info = fit_predictor(profiles, rows, regressor, n_estimators, seed)
    lomo = report["leave_one_model_out"][regressor]
    manifest = {
        "training_data": {"files": [Path(profiles_path).name], "sha256": sha256_files([profiles_path]),
                          "rows": len(profiles), "models": sorted(set(profiles["model"])),
                          "license": license_note},
        "metrics": {"utilization": {"leave_one_model_out": {k: lomo[k] for k in ("rmsle", "rmsle_std", "mae",
                                                                                 "mae_std", "pooled")}},
                    **({"memory": {"leave_one_model_out": info["memory_lomo"]}} if "memory_lomo" in info else {})},
        "seed": seed,
    }
    path = pred.save(out_dir, **manifest, util_regressor=regressor)
    return path, report
