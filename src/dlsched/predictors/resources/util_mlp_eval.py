"""Auxiliary utilisation table of EVALUATION.md: GPUMemNet's 3,000 MLPs, trained on depth <= 5
and tested on deeper nets (extrapolation). The MLP table carries its own architecture
numbers, mapped here onto the graph feature names (an MLP's graph is fully described by them)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from dlsched.predictors.ml import metrics
from dlsched.predictors.resources import profiles
from dlsched.predictors.resources.features import vectorize
from dlsched.predictors.resources.train import ALL_UTIL_FEATURES, features_for, util_factories


def mlp_feature_rows(d: pd.DataFrame) -> list[dict[str, float]]:
    """Graph-style features of each MLP: a Linear layer costs 2 FLOPs per weight per sample."""
    rows = []
    for r in d.itertuples(index=False):
        feats = dict.fromkeys(ALL_UTIL_FEATURES, 0.0)
        act_bytes = 4.0 * r.activations
        fwd = 2.0 * r.params * r.batch
        feats.update(batch=r.batch, flops_per_sample=2.0 * r.params, flops_per_step=6.0 * r.params * r.batch,
                     flops_matmul=2.0 * r.params * r.batch, params=r.params, param_bytes=4.0 * r.params,
                     activation_bytes=act_bytes * r.batch, activation_bytes_per_sample=act_bytes,
                     peak_activation_bytes=act_bytes * r.batch, n_linear_layers=r.depth,
                     n_activations=r.depth, n_norm_layers=r.bn, n_nodes=r.depth * 2 + r.bn + r.dropout,
                     # roofline inputs: every layer is a kernel; each activation is written once and
                     # read by the next layer and its activation function; weights are read once
                     n_kernels=r.depth * 2 + r.bn + r.dropout, flops_tensor=fwd,
                     flops=fwd + r.activations * r.batch,
                     bytes_accessed=4.0 * r.params + 3.0 * act_bytes * r.batch)
        rows.append(feats)
    return rows


def mlp_util_table(path: Path, n_estimators: int = 300, seed: int = 0) -> dict[str, Any]:
    """Per regressor: RMSLE, MAE, Spearman on the deep MLPs after training on shallow ones."""
    d = profiles.load_mlp_memory(path)
    raw = profiles.read_csv(path)
    d["bn"] = pd.to_numeric(raw["Batch Normalization Layers"], errors="coerce").fillna(0)
    d["dropout"] = pd.to_numeric(raw["Dropout Layers"], errors="coerce").fillna(0)
    rows = mlp_feature_rows(d)
    y = d["gpu_util"].to_numpy(float)
    test = (d["depth"] > 5).to_numpy()
    out: dict[str, Any] = {}
    for name, fac in util_factories(n_estimators, seed).items():
        Xi = vectorize(rows, features_for(name))
        pred = np.clip(np.expm1(fac().fit(Xi[~test], np.log1p(y[~test])).predict(Xi[test])), 0, 100)
        out[name] = {"rmsle": metrics.rmsle(y[test], pred), "mae": metrics.mae(y[test], pred),
                     "spearman": metrics.spearman(y[test], pred)}
    return {"estimators": out, "info": {"rows_train": int((~test).sum()), "rows_test": int(test.sum())}}
