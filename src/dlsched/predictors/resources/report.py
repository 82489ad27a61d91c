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


#: targets: TIMM memory (5-fold by family; under-prediction first, issue 36) and Lucid utilisation
#: (leave-one-model-out, issue 11)
TARGETS = {"memory_under0_max": 2.0, "memory_under10_max": 0.0, "memory_median_ratio_max": 1.2,
           "memory_mape_max": 15.0, "memory_band_coverage_min": 0.80,
           "util_fitted_rmsle_max": 0.30, "util_default_rmsle_max": 0.45, "util_default_spearman_min": 0.70}


def training_memory_section(shared: Path, onnx_dir: Path, profiles: Any = None,
                            rows: list[dict[str, float]] | None = None) -> dict[str, Any]:
    """The training-memory model on TIMM (graphs from ``onnx_dir``) plus Lucid's gmem rows,
    beside Horus Eq. 2 and FakeTensor, with the targets and whether each is met."""
    import pandas as pd

    from dlsched.predictors.resources import graph_memory_eval as gme

    csv = shared / "profiles" / "itu_gpumem" / "timm_faketensor_vs_measured_memory.csv"
    parts, info = [], {}
    if csv.is_file():
        timm, info["timm"] = gme.timm_rows(csv, onnx_dir)
        info["timm"]["rows"] = len(timm)
        parts.append(timm)
    if profiles is not None and rows is not None:
        lucid = _lucid_training_rows(profiles, rows)
        if len(lucid):
            parts.append(lucid)
            info["lucid"] = {"rows": len(lucid)}
    parts = [p for p in parts if len(p)]
    if not parts:
        return {"skipped": f"no TIMM graph features (shipped table or graphs in {onnx_dir}: "
                           "scripts/export_timm_onnx.py) and no Lucid rows",
                "evaluation_set": evaluation_set(info, csv, onnx_dir)}
    both = pd.concat(parts, ignore_index=True)
    timm_only = both[both["source"] == "timm"]
    # the targets are on TIMM, fitted on TIMM (what ships); Lucid is shown fitted together, apart
    res = gme.evaluate(timm_only if len(timm_only) else both)
    res["info"] = info
    res["constants"] = gme.fit(timm_only if len(timm_only) else both).constants()
    if len(timm_only) and len(timm_only) < len(both):
        with_lucid = gme.evaluate(both)
        res["fitted_with_lucid"] = {"training_memory": with_lucid["training_memory"],
                                    "constants": gme.fit(both).constants(),
                                    "lucid_per_model": with_lucid["per_model_ratio"]}
        res["calibration_demo_lucid"] = gme.calibration_demo(timm_only, both[both["source"] == "lucid"])
    if len(timm_only):
        # issue 11's demonstration: 20 observed jobs of the TIMM family with the most exported
        # models, the model fitted without that family, error on the family's other models
        counts = timm_only.groupby("family")["model"].nunique().sort_values(ascending=False, kind="stable")
        res["calibration_demo_family"] = gme.family_calibration_demo(timm_only, str(counts.index[0]))
    res["evaluation_set"] = evaluation_set(info, csv, onnx_dir)
    tm = res["training_memory"].get("timm", res["training_memory"]["all"])
    if not len(timm_only):   # the targets are TIMM's: never judge them on another set
        res["targets"] = {"not_scored": "the targets are on the TIMM table; " + res["evaluation_set"]["missing"][0]}
        return res
    res["targets"] = {
        "under0": {"value": tm["under0"], "max": TARGETS["memory_under0_max"],
                   "met": tm["under0"] <= TARGETS["memory_under0_max"]},
        "under10": {"value": tm["under10"], "max": TARGETS["memory_under10_max"],
                    "met": tm["under10"] <= TARGETS["memory_under10_max"]},
        "median_ratio": {"value": tm["median_ratio"], "max": TARGETS["memory_median_ratio_max"],
                         "met": tm["median_ratio"] <= TARGETS["memory_median_ratio_max"]},
        "mape": {"value": tm["mape"], "max": TARGETS["memory_mape_max"], "met": tm["mape"] <= TARGETS["memory_mape_max"]},
        "band_coverage": {"value": tm["band_coverage"], "min": TARGETS["memory_band_coverage_min"],
                          "met": tm["band_coverage"] >= TARGETS["memory_band_coverage_min"]}}
    return res


def _lucid_training_rows(profiles: Any, rows: list[dict[str, float]]) -> Any:
    """Lucid rows with gmem as training-memory inputs (features already resolved)."""
    import pandas as pd

    from dlsched.predictors.ml.folds import lucid_family
    from dlsched.predictors.resources.graph_memory_eval import LUCID_ATTENTION, LUCID_OPTIMIZER
    from dlsched.predictors.resources.train_memory import JobMeta, memory_terms

    out = []
    for r, f in zip(profiles.itertuples(index=False), rows):
        if not np.isfinite(r.gmem) or "saved_bytes" not in f:
            continue
        st, sv, cv, tmp, loss = memory_terms(f, JobMeta(optimizer=LUCID_OPTIMIZER, amp=bool(r.amp),
                                                        attention=LUCID_ATTENTION))
        out.append({"source": "lucid", "model": r.model, "family": "lucid:" + lucid_family(r.model),
                    "batch": int(r.batch), "amp": int(r.amp), "mem_mib": float(r.gmem), "state_mib": st,
                    "saved_mib": sv, "saved_conv_mib": cv, "max_tensor_mib": tmp, "loss_mib": loss,
                    "fake_last_mib": np.nan,
                    "param_mib": f["param_bytes"] / 2**20,
                    "act_mib_per_sample": f["activation_bytes_per_sample"] / 2**20})
    return pd.DataFrame(out)


def evaluation_set(info: dict[str, Any], csv: Path, onnx_dir: Path) -> dict[str, Any]:
    """Which rows the training-memory figures come from, and what a complete run would add: a
    fresh clone without the TIMM graph features scores Lucid's rows only and must say so."""
    timm = info.get("timm", {})
    scored = [(f"timm: {timm.get('rows', 0)} rows of {timm.get('exported', 0)} architectures "
               f"(graph features from {timm.get('features_from', onnx_dir)})")] if timm.get("rows") else []
    if "lucid" in info:
        scored.append(f"lucid: {info['lucid']['rows']} rows (shown apart; not part of the targets)")
    missing = []
    if not csv.is_file():
        missing.append(f"TIMM measurements {csv} not found (GPUMemNet's table: set --shared)")
    elif not timm.get("rows"):
        missing.append(f"no TIMM graph features: neither the shipped table nor graphs in {onnx_dir} "
                       "(scripts/export_timm_onnx.py)")
    elif timm.get("not_exported"):
        missing.append(f"{timm['not_exported']} TIMM architectures have no graph features (not exported)")
    return {"scored": scored, "missing": missing, "targets_on": "timm" if timm.get("rows") else None}


def _measured() -> dict[str, Any]:
    """The held-out check on our own GPU measurements (:mod:`.measured_eval`)."""
    from dlsched.predictors.resources.measured_eval import measured_check

    return measured_check()


def util_targets(util: dict[str, Any]) -> dict[str, Any]:
    """Issue 11's utilisation targets against the leave-one-model-out figures."""
    lomo = util.get("leave_one_model_out", {})
    fitted = min((v["rmsle"] for k, v in lomo.items() if isinstance(v, dict) and "rmsle" in v
                  and not k.startswith("datasheet_")), default=float("nan"))
    best = min((k for k, v in lomo.items() if isinstance(v, dict) and "rmsle" in v and not k.startswith("datasheet_")),
               key=lambda k: lomo[k]["rmsle"], default=None)
    default = lomo.get("datasheet_roofline", {})
    d_rmsle, d_rho = default.get("rmsle", float("nan")), default.get("pooled", {}).get("spearman", float("nan"))
    return {
        "fitted_rmsle": {"value": fitted, "regressor": best, "max": TARGETS["util_fitted_rmsle_max"],
                         "met": bool(fitted <= TARGETS["util_fitted_rmsle_max"])},
        "default_rmsle": {"value": d_rmsle, "max": TARGETS["util_default_rmsle_max"],
                          "met": bool(d_rmsle <= TARGETS["util_default_rmsle_max"])},
        "default_spearman": {"value": d_rho, "min": TARGETS["util_default_spearman_min"],
                             "met": bool(d_rho >= TARGETS["util_default_spearman_min"])},
        "per_model_rmsle": {"fitted": lomo.get(best, {}).get("per_group_rmsle", {}) if best else {},
                            "default": default.get("per_group_rmsle", {})},
    }


def full_report(shared: Path, profiles_path: Path | None = None, n_estimators: int = 300,
                seed: int = 0, timm_onnx: Path | None = None) -> dict[str, Any]:
    """Utilisation tables on the Lucid profiles (or ``profiles_path``) and all memory tables;
    the training-memory figures use the TIMM graphs in ``timm_onnx`` (default: the export cache)."""
    from dlsched.predictors.resources.graph_memory_eval import DEFAULT_TIMM_ONNX

    if not shared.is_dir() and profiles_path is None:
        raise ProfileError(f"{shared}: shared data folder not found (set --shared or $DLSCHED_SHARED)")
    report: dict[str, Any] = {"utilization": {}, "memory": memory_report(shared, n_estimators), "notes": []}
    onnx_dir = timm_onnx or DEFAULT_TIMM_ONNX
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
        report["training_memory"] = training_memory_section(shared, onnx_dir)
        report["measured_jobs"] = _measured()
        return report
    report["utilization"].update(util_report(profiles, rows, n_estimators, seed))
    if profiles_path is None:  # the host constants beside Gavel's throughputs and Orion's kernels
        from dlsched.predictors.resources.features import vectorize
        from dlsched.predictors.resources.roofline import ROOFLINE_FEATURES
        from dlsched.predictors.resources.util_evidence import host_crosscheck

        folds, labels = profiles["model"].factorize()
        report["utilization"]["host_crosscheck"] = host_crosscheck(
            shared, vectorize(rows, ROOFLINE_FEATURES), profiles["gpu_util"].to_numpy(float), folds, list(labels))
    report["util_targets"] = util_targets(report["utilization"])
    report["training_memory"] = training_memory_section(shared, onnx_dir, profiles, rows)
    report["measured_jobs"] = _measured()
    if np.isfinite(profiles["gmem"].to_numpy(float)).all():
        report["memory"]["lucid_lomo"] = lucid_memory(profiles, rows)
        report["memory"]["lucid_lomo_info"] = {"rows": len(profiles), "models": int(profiles["model"].nunique())}
    return report
