"""Held-out check on our own measurements (``scripts/measure_gpu_jobs.py``): the jobs the memory
model was never fitted on, measured on one GPU with a known stack.

Measurements are committed as ``data/measured/<run>/{jobs,pairs}.csv`` + ``stack.json``; every
run found there is scored: memory against NVML's used memory of the process (what nvidia-smi
shows, CUDA context included; the prediction uses the run's stack: ``lazy`` unless its
``CUDA_MODULE_LOADING`` says EAGER), utilisation against NVML's mean. With no run committed the
check says so instead of scoring anything."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsched.predictors.ml import metrics

MEASURED_DIR = Path(__file__).resolve().parent / "data" / "measured"
#: the script's attention labels (transformers' attn_implementation) -> dlsched's modes
ATTENTION = {"": "eager", "eager": "eager", "sdpa": "fused", "flash_attention_2": "fused"}


def runs(base: Path = MEASURED_DIR) -> list[Path]:
    """Committed measurement runs (folders with a jobs.csv), oldest first."""
    return sorted(p.parent for p in base.glob("*/jobs.csv")) if base.is_dir() else []


def _stack(info: dict[str, Any]) -> str:
    return "eager" if str(info.get("CUDA_MODULE_LOADING", "")).upper().startswith("EAGER") else "lazy"


def score_run(run: Path, predictor: Any, resolve: Any) -> dict[str, Any]:
    """MAPE, share under-predicted by > 10 % and band coverage of memory; MAE of utilisation."""
    from dlsched.predictors.resources.train_memory import JobMeta

    info = json.loads((run / "stack.json").read_text()) if (run / "stack.json").is_file() else {}
    jobs = pd.read_csv(run / "jobs.csv", keep_default_na=True)
    gpu = str(info.get("gpu", "unknown"))
    if info.get("dry_run"):
        return {"run": run.name, "skipped": "a --dry-run (CPU): no GPU figures to score"}
    ok = jobs[jobs["error"].isna() & jobs["nvml_used_mib"].notna()] if "error" in jobs else jobs
    y, p, lo, hi, u_true, u_pred, unresolved = [], [], [], [], [], [], set()
    for r in ok.itertuples(index=False):
        try:
            feats = resolve(str(r.model), int(r.batch), int(r.seq or 0))
        except Exception:  # noqa: BLE001 - a model without a graph here: counted
            unresolved.add(str(r.model))
            continue
        meta = JobMeta(str(r.optimizer or "adam"), bool(r.amp), attention=ATTENTION.get(str(r.attention or ""), "fused"))
        m = predictor.predict_mem_mib(feats, gpu, meta=meta, stack=_stack(info))
        if m is None:
            continue
        y.append(float(r.nvml_used_mib))
        p.append(m[0])
        lo.append(m[1])
        hi.append(m[2])
        if not math.isnan(float(r.nvml_util_mean)):
            u = predictor.predict_util(feats, gpu)
            if u is not None:
                u_true.append(float(r.nvml_util_mean))
                u_pred.append(u[0])
    out: dict[str, Any] = {"run": run.name, "gpu": gpu, "stack": _stack(info), "rows": len(y),
                           "failed_jobs": int(len(jobs) - len(ok)), "models_without_graph": sorted(unresolved),
                           "versions": {k: info.get(k) for k in ("torch", "cuda", "cudnn", "driver", "transformers")}}
    if y:
        ya, pa = np.asarray(y), np.asarray(p)
        out["memory"] = {"mape": metrics.mape(ya, pa), "under10": metrics.under_share(ya, pa),
                         "median_ratio": float(np.median(pa / ya)),
                         "band_coverage": float(np.mean((ya >= np.asarray(lo)) & (ya <= np.asarray(hi))))}
    if u_true:
        out["utilisation"] = {"mae_points": metrics.mae(np.asarray(u_true), np.asarray(u_pred)), "rows": len(u_true)}
    if (run / "pairs.csv").is_file():
        pairs = pd.read_csv(run / "pairs.csv")
        out["pairs"] = int(pairs["speed_a"].notna().sum()) if "speed_a" in pairs else 0
    return out


def measured_check(predictor: Any = None, resolve: Any = None, base: Path = MEASURED_DIR) -> dict[str, Any]:
    """Every committed run scored, or a plain statement that there is none."""
    found = runs(base)
    if not found:
        where = "src/dlsched/predictors/resources/data/measured/" if base == MEASURED_DIR else str(base)
        return {"runs": [], "missing": f"no measurements committed under {where} (scripts/measure_gpu_jobs.py on a "
                                       "GPU writes them; it has not met a GPU yet)"}
    if predictor is None:
        from dlsched.predictors.resources.default import load_default

        predictor = load_default()
    if resolve is None:
        from dlsched.predictors.resources.graph_source import graph_features, seq_features

        def resolve(model: str, batch: int, seq: int) -> dict[str, float]:
            return seq_features(model, batch, seq) if seq else graph_features(model, batch)
    return {"runs": [score_run(r, predictor, resolve) for r in found]}


__all__ = ["MEASURED_DIR", "measured_check", "runs", "score_run"]
