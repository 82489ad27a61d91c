"""``predictor evaluate``'s training-memory section says which rows it scored and what is missing,
and never judges the TIMM targets on another set (a fresh clone without TIMM graph features)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from dlsched.predictors.resources.report import evaluation_set, training_memory_section

MIB = 2.0**20


def _lucid(n_models: int = 6) -> tuple[pd.DataFrame, list[dict[str, float]]]:
    rng = np.random.default_rng(0)
    prof, rows = [], []
    for i in range(n_models):
        for b in (16, 32, 64):
            p, a = rng.uniform(10, 500), rng.uniform(5, 50)
            prof.append({"model": f"M{i}", "batch": b, "amp": 0, "gmem": 1500 + 4 * p + a * b})
            rows.append({"param_bytes": p * MIB, "saved_bytes": a * b * MIB, "saved_bytes_amp": a * b * MIB / 2,
                         "max_tensor_bytes": MIB, "saved_attn_bytes": 0.0, "saved_attn_bytes_amp": 0.0,
                         "activation_bytes_per_sample": 2 * a * MIB})
    return pd.DataFrame(prof), rows


def test_without_timm_the_section_says_so_and_scores_no_target(tmp_path: Path) -> None:
    prof, rows = _lucid()
    res = training_memory_section(tmp_path / "no-shared", tmp_path / "no-onnx", prof, rows)
    ev = res["evaluation_set"]
    assert ev["targets_on"] is None and ev["scored"] == ["lucid: 18 rows (shown apart; not part of the targets)"]
    assert "TIMM measurements" in ev["missing"][0] and "not found" in ev["missing"][0]
    assert "not_scored" in res["targets"] and "met" not in str(res["targets"])
    assert res["training_memory"]["lucid"]["rows"] == 18


def test_evaluation_set_names_the_feature_source(tmp_path: Path) -> None:
    csv = tmp_path / "timm.csv"
    csv.write_text("x\n")
    ev = evaluation_set({"timm": {"rows": 1217, "exported": 253, "features_from": "shipped timm_graph_features.csv.gz",
                                  "not_exported": 725}}, csv, tmp_path)
    assert ev["targets_on"] == "timm"
    assert ev["scored"] == [("timm: 1217 rows of 253 architectures (graph features from shipped "
                             "timm_graph_features.csv.gz)")]
    assert ev["missing"] == ["725 TIMM architectures have no graph features (not exported)"]
    ev = evaluation_set({"timm": {"rows": 0}}, csv, tmp_path / "onnx")
    assert ev["targets_on"] is None and "no TIMM graph features" in ev["missing"][0]


def test_timm_rows_come_from_the_shipped_feature_table_without_exports(tmp_path: Path) -> None:
    """A fresh clone has no exported TIMM graphs: the shipped table of graph features gives the
    same rows (measurements still from the TIMM csv), and the source is named."""
    from dlsched.predictors.resources import graph_memory_eval as gme

    csv = tmp_path / "timm.csv"
    csv.write_text("Filename,Batch Size,Max GPU Memory (MiB),GB after Forward,GB after Backward,Last Numeric Value\n"
                   "resnet18_1.out,8,2000,100,200,300\nresnet18_2.out,16,2500,100,200,400\n"
                   "vit_tiny_1.out,8,3000,100,200,500\n")
    feats = {("resnet18", 8): 1.0, ("resnet18", 16): 2.0}
    table = {k: {c: v * MIB for c in gme.FEATURE_COLUMNS} for k, v in feats.items()}
    shipped = gme.write_feature_table(table, tmp_path / "features.csv.gz")
    rows, info = gme.timm_rows(csv, tmp_path / "no-onnx", shipped=shipped)
    assert list(rows["model"]) == ["resnet18", "resnet18"] and list(rows["batch"]) == [8, 16]
    assert info["features_from_shipped"] == 1 and info["not_exported"] == 1 and info["features_from_onnx"] == 0
    assert info["features_from"] == "shipped features.csv.gz"
    # state = P (2 + 1) with SGD momentum (timm's default), fused attention: saved - attn + rows
    assert rows["state_mib"].tolist() == [3.0, 6.0]
