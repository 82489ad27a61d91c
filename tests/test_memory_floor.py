"""Issue 36 point 1: no exact term below its bytes. Weights, gradients, optimizer state, foreach
Adam's step temporary and DDP's buckets count in full; the loss transient of the output layer is
modelled from the graph; neither the fitted factors, the band nor a calibration takes a
prediction's ``lo`` below the job's physical floor."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlsched.predictors.resources.bundle import Predictor
from dlsched.predictors.resources.context import KNOWN_STACKS, context_range, stack_context
from dlsched.predictors.resources.default import load_default
from dlsched.predictors.resources.graph_memory_eval import FEATURE_COLUMNS, SHIPPED_TIMM_FEATURES
from dlsched.predictors.resources.train_memory import (
    LOSS_COPIES,
    JobMeta,
    TrainingMemoryModel,
    memory_terms,
    physical_floor,
)
from dlsched.predictors.resources.zoo_features import (
    SHIPPED_ZOO_FEATURES,
    ZOO_FEATURES_BATCH,
    load_zoo_features,
)

MIB = 2.0**20
METAS = [JobMeta("sgd"), JobMeta("sgd_momentum"), JobMeta("adam"), JobMeta("adamw", amp=True),
         JobMeta("adam", optimizer_impl="fused"), JobMeta("adam", ddp=True), JobMeta("adam", attention="eager")]
#: small zoo models (a few seconds of export each; lstm_lm has a 33,278-word LM head)
SMALL_ZOO = ("neumf", "resnet18_cifar", "lstm_lm")


def floor_of(features: dict[str, float], meta: JobMeta, context_mib: float) -> float:
    """The floor by hand: context + 2P + k·P (+P/2 AMP, +P foreach Adam, +P DDP) + saved + loss."""
    p = features["param_bytes"] / MIB
    k = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}[meta.optimizer]
    state = p * (2 + k) + (0.5 * p if meta.amp else 0) + (p if meta.ddp else 0)
    state += p if meta.optimizer.startswith("adam") and meta.optimizer_impl == "foreach" else 0
    sfx = "_amp" if meta.amp else ""
    saved = features["saved_bytes" + sfx] / MIB
    if meta.attention != "eager":
        saved += (features.get("saved_attn_rows_bytes", 0.0) - features.get("saved_attn_bytes" + sfx, 0.0)) / MIB
    loss = LOSS_COPIES[meta.amp] * features.get("loss_output_bytes", 0.0) / MIB
    return context_mib + state + saved + loss


def lowest_context(gpu: str, stack: str, pred: Predictor) -> float:
    fitted = float(pred.mem_model.coef_[0])
    if stack == "unknown":
        return context_range(gpu, fitted)[0]
    return fitted if stack == pred.mem_model.stack_ else stack_context(stack, gpu, fitted).total_mib


def test_the_shipped_fit_never_scales_an_exact_term_below_one() -> None:
    c = json.loads((Path(SHIPPED_TIMM_FEATURES).parent / "training_memory.json").read_text())["constants"]
    assert c["state_scale"] >= 1.0 and c["safety"] >= 1.0
    # a model file fitted before the floor (state factor 0.835) is read with the state in full
    old = TrainingMemoryModel.from_constants(1782.0, 0.835, 0.96, 1.13, 2.5, 1.107, (0.81, 1.1))
    X = np.array([[4000.0, 100.0, 0.0, 10.0, 0.0]])
    assert old.predict(X)[0] >= 1782.0 + 4000.0 + 100.0
    assert old.predict_band(X)[1][0] >= physical_floor(X, 1782.0)[0]


def test_foreach_adam_counts_one_full_temporary_even_beside_large_activations() -> None:
    """issue 36: a measured GPT-2-large step matches 4P + saved + one full P + context."""
    f = {"param_bytes": 2953 * MIB, "saved_bytes": 5000 * MIB, "saved_bytes_amp": 2600 * MIB,
         "max_tensor_bytes": 196 * MIB, "saved_attn_bytes": 0.0, "saved_attn_bytes_amp": 0.0}
    state = memory_terms(f, JobMeta("adam"))[0]
    assert state == pytest.approx(5 * 2953)   # weights, gradients, two moments, sqrt(v) temporary
    assert memory_terms(f, JobMeta("adam", optimizer_impl="fused"))[0] == pytest.approx(4 * 2953)


def test_the_loss_transient_is_four_copies_of_the_logits() -> None:
    """BERT-base MLM at b32/s512: 30,522-word logits are 1.86 GiB fp32; the loss holds them, their
    log-softmax, its gradient and the logits' gradient at once (the old fit allowed 2.8 copies)."""
    logits = 32 * 512 * 30522 * 4
    f = {"param_bytes": 420 * MIB, "saved_bytes": 9000 * MIB, "saved_bytes_amp": 5000 * MIB,
         "max_tensor_bytes": logits, "saved_attn_bytes": 0.0, "saved_attn_bytes_amp": 0.0,
         "loss_output_bytes": logits}
    terms = memory_terms(f, JobMeta("adamw"))
    assert terms[4] == pytest.approx(4 * logits / MIB)
    assert memory_terms(f, JobMeta("adamw", amp=True))[4] == pytest.approx(3 * logits / MIB)
    pred = load_default()
    mean, lo, _ = pred.predict_mem_mib(f, "A100", meta=JobMeta("adamw"), stack="lazy")
    floor = floor_of(f, JobMeta("adamw"), stack_context("lazy", "A100").total_mib)
    assert lo >= floor - 1e-6 and mean >= floor
    assert floor - (stack_context("lazy", "A100").total_mib + 5 * 420 + 9000) == pytest.approx(4 * logits / MIB)


def test_lo_is_at_least_the_floor_on_every_shipped_timm_graph_every_meta_and_stack() -> None:
    """Every architecture of the shipped feature table (267 TIMM graphs), at its measured
    batches, under every optimizer/precision/attention/DDP choice and every known stack; also
    after a calibration that would pull predictions far down."""
    pred = load_default()
    table = pd.read_csv(SHIPPED_TIMM_FEATURES)
    assert table["model"].nunique() >= 250
    hostile = Predictor(pred.util_model, pred.util_features, pred.mem_model, mem_band=pred.mem_band,
                        mem_affine={"a100|unknown": (-50_000.0, 0.1), "a100|lazy": (-50_000.0, 0.1)})
    checked = 0
    for r in table.to_dict("records"):
        f = {k: float(r[k]) for k in FEATURE_COLUMNS if k in r}
        for meta in METAS:
            for stack in KNOWN_STACKS:
                for p in (pred, hostile):
                    mean, lo, hi = p.predict_mem_mib(f, "A100", meta=meta, stack=stack)
                    floor = floor_of(f, meta, lowest_context("A100", stack, pred))
                    assert lo >= floor - 1e-6, (r["model"], r["batch"], meta, stack)
                    assert lo <= mean <= hi
                    checked += 1
    assert checked > 10_000


@pytest.mark.parametrize("name", SMALL_ZOO)
def test_lo_is_at_least_the_floor_for_small_zoo_models(name: str) -> None:
    from dlsched.predictors.resources.graph_source import graph_features

    f = graph_features(name, 32)
    pred = load_default()
    if name == "lstm_lm":   # the LM head's logits (batch x bptt 35 x vocab 33,278) are the loss output
        assert f["loss_output_bytes"] == 32 * 35 * 33278 * 4
    for meta in METAS:
        for stack in KNOWN_STACKS:
            _, lo, _ = pred.predict_mem_mib(f, "A100", meta=meta, stack=stack)
            assert lo >= floor_of(f, meta, lowest_context("A100", stack, pred)) - 1e-6, (name, meta, stack)


def test_the_shipped_zoo_features_cover_every_zoo_model_of_this_zoo_version() -> None:
    """A zoo model added (or a definition changed, which bumps ZOO_VERSION) without regenerating
    ``data/zoo_graph_features.json`` (``python scripts/zoo_graph_features.py``) fails here."""
    from dlsched.graph.zoo import ZOO_NAMES, ZOO_VERSION

    doc = json.loads(SHIPPED_ZOO_FEATURES.read_text())
    assert doc["zoo_version"] == ZOO_VERSION and doc["batch"] == ZOO_FEATURES_BATCH
    shipped = load_zoo_features()
    assert sorted(shipped) == sorted(ZOO_NAMES)
    assert all(f["batch"] == ZOO_FEATURES_BATCH for f in shipped.values())
    # the largest model's row is its own: GPT-2 large has 774,030,080 parameters (fp32 bytes: 4x)
    assert shipped["gpt2_large"]["params"] == 774_030_080
    assert shipped["gpt2_large"]["param_bytes"] == 4 * 774_030_080


@pytest.mark.parametrize("name", SMALL_ZOO)
def test_a_live_export_of_a_small_zoo_model_gives_the_shipped_features(name: str) -> None:
    """Every feature, exactly: the shipped file cannot drift from the exporter and the analysis
    unnoticed (the large models are exported only by the regeneration script)."""
    from dlsched.predictors.resources.graph_source import graph_features

    live = graph_features(name, ZOO_FEATURES_BATCH)
    shipped = load_zoo_features()[name]
    assert sorted(live) == sorted(shipped)
    # to the last bits only: the analysis recovers its per-batch polynomials with LAPACK's solve
    # (graph/poly.py), whose rounding moves by an ulp between numpy/OpenBLAS builds (measured: lstm_lm's
    # flops 4097205840.0000005 against the shipped 4097205840.0 on numpy 2.4.6); any drift of the
    # exporter or the analysis moves a feature by far more than 1e-12 of itself
    assert {k: v for k, v in live.items() if not math.isclose(v, shipped[k], rel_tol=1e-12, abs_tol=1e-9)} == {}


def test_lo_is_at_least_the_floor_for_every_zoo_model() -> None:
    """Every zoo model (GPT-2 large, BERT-large, ViT-B/16 included), from the shipped graph
    features, under every optimizer/precision/attention/DDP choice and every known stack; also
    after a calibration that would pull predictions far down."""
    pred = load_default()
    hostile = Predictor(pred.util_model, pred.util_features, pred.mem_model, mem_band=pred.mem_band,
                        mem_affine={"a100|unknown": (-50_000.0, 0.1), "a100|lazy": (-50_000.0, 0.1)})
    checked = 0
    for name, f in load_zoo_features().items():
        for meta in METAS:
            for stack in KNOWN_STACKS:
                floor = floor_of(f, meta, lowest_context("A100", stack, pred))
                for p in (pred, hostile):
                    mean, lo, hi = p.predict_mem_mib(f, "A100", meta=meta, stack=stack)
                    assert lo >= floor - 1e-6, (name, meta, stack)
                    assert lo <= mean <= hi
                    checked += 1
    assert checked == 23 * len(METAS) * len(KNOWN_STACKS) * 2


def test_evaluate_prints_the_under_prediction_shares_first() -> None:
    """`predictor evaluate`: per target set, under > 0 % and > 10 % come before median and MAPE."""
    from rich.console import Console
    from rich.table import Table

    from dlsched.cli.predictor_cmd import _render_training_memory

    printed: list[object] = []

    class Con:
        def print(self, obj: object) -> None:
            printed.append(obj)

    res = {"training_memory": {"timm": {"under0": 1.8, "under10": 1.4, "median_ratio": 1.52, "mape": 54.4,
                                        "rows": 1257, "band_coverage": 0.8}}}
    _render_training_memory(Con(), res)
    first = printed[0]
    assert first == ("training_memory (timm): under-predicted 1.8 % of 1257 rows (by > 10 %: 1.4 %); "
                     "median predicted/measured 1.52, MAPE 54.4 %")
    table = next(p for p in printed if isinstance(p, Table))
    assert [c.header for c in table.columns][:5] == ["estimator", "rows", "under > 0 %", "under > 10 %",
                                                     "median ratio"]
    con = Console(record=True, width=200)
    con.print(table)
    text = con.export_text()   # (export clears the record)
    assert "1.8" in text and "54.4" in text
