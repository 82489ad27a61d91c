"""Everything ``dlsched predictor evaluate`` prints, as one JSON-ready dict."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from dlsched.predictors.resources.evaluate import cross_val_predict, mem_scores
from dlsched.predictors.resources.features import mem_inputs
from dlsched.predictors.resources.graph_source import FeatureError
from dlsched.predictors.resources.memory import HorusEq2Estimator, LinearMemoryEstimator
from dlsched.predictors.resources.memory_eval import memory_report
from dlsched.predictors.resources.profiles import ProfileError, load_util_profiles
from dlsched.predictors.resources.train import feature_rows, util_report
from dlsched.predictors.resources.util_mlp_eval import mlp_util_table


def lucid_memory(profiles: Any, rows: list[dict[str, float]]) -> dict[str, Any]:
    """Memory on the profiled architectures (graph features), leave-one-model-out."""
    y = profiles["gmem"].to_numpy(float)
    M = np.asarray([mem_inputs(r) for r in rows])
    folds = profiles["model"].factorize()[0]
    facs = {"horus_eq2": HorusEq2Estimator, "horus_eq2+1000MiB": lambda: HorusEq2Estimator(delta_mib=1000.0),
            "prior (no fit)": LinearMemoryEstimator.prior,
            "linear_q0.9": lambda: LinearMemoryEstimator(quantile=0.9)}
    out = {}
    for name, fac in facs.items():
        pred = fac().predict(M) if name.startswith("prior") else cross_val_predict(fac, M, y, folds)
        out[name] = mem_scores(y, pred, folds)
    return out


def full_report(shared: Path, profiles_path: Path | None = None, n_estimators: int = 300,
                seed: int = 0) -> dict[str, Any]:
    """Utilisation tables on the Lucid profiles (or ``profiles_path``) and all memory tables."""
    if not shared.is_dir() and profiles_path is None:
        raise ProfileError(f"{shared}: shared data folder not found (set --shared or $DLSCHED_SHARED)")
    report: dict[str, Any] = {"utilization": {}, "memory": memory_report(shared, n_estimators), "notes": []}
    mlp = shared / "profiles" / "itu_gpumem" / "gpumemnet_mlp_data_step2.csv.gz"
    if profiles_path is None and mlp.is_file():
        aux = mlp_util_table(mlp, n_estimators, seed)
        report["utilization_aux"] = {"mlp_depth_split": aux["estimators"], "mlp_depth_split_info": aux["info"]}
    path = profiles_path or shared / "profiles" / "lucid" / "single_data.csv"
    profiles = load_util_profiles(path)
    try:
        rows = feature_rows(profiles)
    except FeatureError as exc:
        report["notes"].append(f"utilisation tables skipped: {exc}")
        return report
    report["utilization"].update(util_report(profiles, rows, n_estimators, seed))
    if np.isfinite(profiles["gmem"].to_numpy(float)).all():
        report["memory"]["lucid_lomo"] = lucid_memory(profiles, rows)
        report["memory"]["lucid_lomo_info"] = {"rows": len(profiles), "models": int(profiles["model"].nunique())}
    return report
