"""Attention patterns of the zoo's transformers (dlsched.graph.saved), each built by hand as the
exporter writes it, with the s×s tensors counted by hand; and what the attention modes change in
the training-memory terms (BERT-base at batch 32, seq 512, by hand)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlsched.graph import analyze
from dlsched.predictors.resources.train_memory import JobMeta, TrainingMemoryModel, memory_terms

MIB = 2.0**20
B, H, S, D = 2, 3, 16, 8   # batch, heads, sequence, head width


def _c(name: str, v: object, dtype: type = np.float32) -> onnx.TensorProto:
    return numpy_helper.from_array(np.array(v, dtype=dtype), name)


def _attention(middle: list, scores_in: str = "s", probs_out: str = "pf", extra_inits: tuple = ()) -> onnx.ModelProto:
    """q, k, v: [b, h, s, d] inputs; scores = q·kᵀ, ``middle`` turns ``scores_in`` into
    ``probs_out``, which multiplies v; the output feeds a projection (so o is kept once)."""
    nodes = [helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 1, 3, 2]),
             helper.make_node("MatMul", ["q", "kt"], [scores_in]),
             *middle,
             helper.make_node("MatMul", [probs_out, "v"], ["o"]),
             helper.make_node("MatMul", ["o", "w"], ["y"])]
    x = [helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", H, "seq", D]) for n in ("q", "k", "v")]
    inits = [numpy_helper.from_array(np.zeros((D, D), np.float32), "w"), *extra_inits]
    graph = helper.make_graph(nodes, "attn", x, [helper.make_tensor_value_info("y", TensorProto.FLOAT,
                                                                             ["batch", H, "seq", D])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


BSS = B * H * S * S            # elements of one attention matrix
ROWS = B * H * S               # its rows: one fp32 log-sum-exp each in a fused kernel
QKVO = 4 * (4 * B * H * S * D)  # q, kᵀ (a view of k), v and o, fp32, kept by the three MatMuls

PATTERNS = {
    # BERT/ViT (HF eager): scores / sqrt(d) + mask -> Softmax -> Dropout (mask output) -> ·v
    "bert": ([helper.make_node("Div", ["s", "scale"], ["sd"]), helper.make_node("Add", ["sd", "mask"], ["sm"]),
              helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
              helper.make_node("Dropout", ["p", "ratio", "train"], ["pf", "m"])],
             (_c("scale", 8.0), _c("mask", np.zeros((1, 1, 1, 1))), _c("ratio", 0.1), _c("train", True, bool)),
             4 * BSS + BSS + 4 * BSS),   # probabilities, bool mask, dropped copy
    # GPT-2: scores * 1/sqrt(d) + causal mask -> Softmax -> Cast -> Dropout (no mask output) -> ·v
    "gpt2": ([helper.make_node("Mul", ["s", "scale"], ["sd"]), helper.make_node("Add", ["sd", "mask"], ["sm"]),
              helper.make_node("Softmax", ["sm"], ["p"], axis=-1),
              helper.make_node("Cast", ["p"], ["pc"], to=TensorProto.FLOAT),
              helper.make_node("Dropout", ["pc", "ratio", "train"], ["pf"])],
             (_c("scale", 0.125), _c("mask", np.zeros((1, 1, 1, 1))), _c("ratio", 0.1), _c("train", True, bool)),
             4 * BSS + BSS + 4 * BSS),   # the Cast keeps nothing; mask 1 byte/element
    # T5: no scaling, + position bias, Cast to fp32 -> Softmax -> Cast back -> Dropout -> ·v
    "t5": ([helper.make_node("Add", ["s", "bias"], ["sb"]),
            helper.make_node("Cast", ["sb"], ["sf"], to=TensorProto.FLOAT),
            helper.make_node("Softmax", ["sf"], ["p"], axis=-1),
            helper.make_node("Cast", ["p"], ["pc"], to=TensorProto.FLOAT),
            helper.make_node("Dropout", ["pc", "ratio", "train"], ["pf", "m"])],
           (_c("bias", np.zeros((1, H, 1, 1))), _c("ratio", 0.1), _c("train", True, bool)),
           4 * BSS + BSS + 4 * BSS),
    # the zoo Transformer (masked_fill): scores / sqrt(d) -> Where(mask, -1e9, scores) -> Softmax -> ·v;
    # Where keeps only its condition (an input here), never the s×s scores
    # (the causal condition is computed from the scores' shape, as the exporter writes it)
    "zoo_transformer": ([helper.make_node("Div", ["s", "scale"], ["sd"]),
                         helper.make_node("Shape", ["s"], ["shp"]),
                         helper.make_node("ConstantOfShape", ["shp"], ["ones"],
                                          value=numpy_helper.from_array(np.array([1.0], np.float32))),
                         helper.make_node("Trilu", ["ones"], ["tri"], upper=1),
                         helper.make_node("Cast", ["tri"], ["cond"], to=TensorProto.BOOL),
                         helper.make_node("Where", ["cond", "neg", "sd"], ["sm"]),
                         helper.make_node("Softmax", ["sm"], ["pf"], axis=-1)],
                        (_c("scale", 8.0), _c("neg", -1e9)),
                        4 * BSS),   # the probabilities; Where keeps its bool condition (not tagged: see EXTRA)
    # timm ViT / SDPA exported without dropout (attn_drop 0): scores * scale -> Softmax -> ·v
    "vit_sdpa": ([helper.make_node("Mul", ["s", "scale"], ["sd"]), helper.make_node("Softmax", ["sd"], ["pf"], axis=-1)],
                 (_c("scale", 0.125),),
                 4 * BSS),               # only the probabilities (kept by softmax and ·v: once)
}


#: other bytes a pattern keeps: the zoo Transformer's Where keeps its causal condition, 1 B/element
EXTRA = {"zoo_transformer": BSS}


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_every_attention_pattern_is_tagged_by_hand(name: str) -> None:
    middle, inits, attn = PATTERNS[name]
    a = analyze(_attention(middle, extra_inits=inits))
    f = a.features(B, S)
    assert f["attn_layers"] == 1
    assert f["saved_attn_bytes"] == pytest.approx(attn)
    assert f["saved_attn_rows_bytes"] == pytest.approx(4 * ROWS)
    # everything else kept is q, kᵀ, v, o: the s×s tensors are exactly the tagged part
    assert f["saved_bytes"] == pytest.approx(QKVO + attn + EXTRA.get(name, 0))
    eager = memory_terms(f, JobMeta("sgd", attention="eager"))
    fused = memory_terms(f, JobMeta("sgd", attention="fused"))
    assert (eager[1] - fused[1]) * MIB == pytest.approx(attn - 4 * ROWS)
    assert memory_terms(f, JobMeta("sgd", attention="memory_efficient")) == fused


def test_softmax_outside_attention_is_not_tagged() -> None:
    """A classifier's Softmax (after a Gemm with weights) is no attention."""
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Softmax", ["h"], ["y"], axis=-1)]
    g = helper.make_graph(nodes, "cls", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 16])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
                          [numpy_helper.from_array(np.zeros((16, 10), np.float32), "w")])
    f = analyze(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])).features(4)
    assert f["saved_attn_bytes"] == 0 and f["attn_layers"] == 0 and f["saved_attn_rows_bytes"] == 0


def bert_base_shaped() -> onnx.ModelProto:
    """BERT-base's attention geometry (12 layers x 12 heads, head width 64, dropout 0.1) as the
    HF eager exporter writes each layer: the s×s tensors depend on layers, heads, batch and seq
    only, so the rest of the encoder is left out (the full export takes minutes on 2 cores)."""
    h, d, nodes, inits = 12, 64, [], [_c("scale", 8.0), _c("ratio", 0.1), _c("train", True, bool),
                                        _c("mask", np.zeros((1, 1, 1, 1)))]
    x = "x0"
    for li in range(12):
        p = f"l{li}_"
        nodes += [helper.make_node("Transpose", [x], [p + "kt"], perm=[0, 1, 3, 2]),
                  helper.make_node("MatMul", [x, p + "kt"], [p + "s"]),
                  helper.make_node("Div", [p + "s", "scale"], [p + "sd"]),
                  helper.make_node("Add", [p + "sd", "mask"], [p + "sm"]),
                  helper.make_node("Softmax", [p + "sm"], [p + "p"], axis=-1),
                  helper.make_node("Dropout", [p + "p", "ratio", "train"], [p + "pd", p + "m"]),
                  helper.make_node("MatMul", [p + "pd", x], [p + "o"])]
        x = p + "o"
    g = helper.make_graph(nodes, "bert_base_attention",
                          [helper.make_tensor_value_info("x0", TensorProto.FLOAT, ["batch", h, "seq", d])],
                          [helper.make_tensor_value_info(x, TensorProto.FLOAT, ["batch", h, "seq", d])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_bert_base_batch32_seq512_fused_removes_exactly_the_sxs_tensors() -> None:
    f = analyze(bert_base_shaped()).features(32, 512)
    per_layer = 32 * 12 * 512 * 512                       # elements of one layer's probabilities
    sxs = 12 * per_layer * (4 + 1 + 4)                    # fp32 probs + bool mask + fp32 dropped copy
    assert sxs == 10_871_635_968                          # 10.125 GiB
    lse = 12 * 32 * 12 * 512 * 4                          # fp32 log-sum-exp per row: 9 MiB
    assert f["saved_attn_bytes"] == pytest.approx(sxs) and f["saved_attn_rows_bytes"] == pytest.approx(lse)
    eager = memory_terms(f, JobMeta("adamw", attention="eager"))
    fused = memory_terms(f, JobMeta("adamw"))
    assert (eager[1] - fused[1]) * MIB == pytest.approx(sxs - lse)
    # the prediction moves by the same bytes, times the fitted activation scale and the safety lift
    # (an activation scale x lift below 1 would be raised to the physical floor: 1.2 x 1.1 here)
    m = TrainingMemoryModel.from_constants(1000.0, 1.0, 1.2, 1.1, 0.5, safety=1.1)
    diff = m.predict(np.asarray([eager]))[0] - m.predict(np.asarray([fused]))[0]
    assert diff == pytest.approx(1.1 * 1.2 * (sxs - lse) / MIB)
    # under AMP the probabilities stay fp32 (softmax runs in fp32), the dropped copy is fp16
    assert f["saved_attn_bytes_amp"] == pytest.approx(12 * per_layer * (4 + 1 + 2))


def test_real_exports_of_bert_and_gpt2_tag_the_same_tensors() -> None:
    """The tiny HF configs through the real exporter: 2 layers x 2 heads, eager attention with
    dropout (BERT's Dropout has a mask output, GPT-2 casts the softmax before its dropout)."""
    pytest.importorskip("transformers")
    from dlsched.graph.export import export_hf_config

    b, s, layers, heads = 4, 64, 2, 2
    for cfg, head in (("bert-tiny", "qa"), ("gpt2-tiny", "lm")):
        f = analyze(export_hf_config(cfg, 16, head=head)).features(b, s)
        assert f["attn_layers"] == layers, cfg
        assert f["saved_attn_bytes"] == pytest.approx(layers * 9 * b * heads * s * s), cfg
        assert f["saved_attn_rows_bytes"] == pytest.approx(layers * 4 * b * heads * s), cfg


def test_predict_cli_attention_option(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from dlsched.cli.main import app

    path = tmp_path / "bert_attn.onnx"
    onnx.save(bert_base_shaped(), path)
    run = CliRunner().invoke
    base = ["predict", str(path), "--batch", "32", "--seq", "512", "--gpu", "A100-40GB", "--json"]
    fused = json.loads(run(app, base).output)
    eager = json.loads(run(app, [*base, "--attention", "eager"]).output)
    assert fused["attention"] == "fused" and eager["attention"] == "eager" and fused["attention_layers"] == 12
    sxs, lse = 10_871_635_968, 12 * 32 * 12 * 512 * 4
    assert eager["saved_activation_bytes"] - fused["saved_activation_bytes"] == pytest.approx(sxs - lse)
    assert eager["gpu_mem_mib"]["mean"] > fused["gpu_mem_mib"]["mean"] + 0.8 * sxs / MIB
    res = run(app, ["predict", str(path), "--attention", "flash9"])
    assert res.exit_code == 2 and res.output.strip().startswith("error: --attention 'flash9': expected one of")
    res = run(app, ["predict", "--help"])
    flat = " ".join(res.output.replace("│", " ").split())
    assert "--attention" in flat and "fused (default:" in flat


def test_predict_cli_stack_option(tmp_path) -> None:
    import json

    from typer.testing import CliRunner

    from dlsched.cli.main import app
    from dlsched.predictors.resources.bundle import Predictor
    from dlsched.predictors.resources.context import stack_context

    model = TrainingMemoryModel.from_constants(1800.0, 1.0, 1.0, 1.0, 1.0, safety=1.1)
    model.stack_ = "gpumemnet-a100"   # like the shipped constants: fitted on GPUMemNet's stack
    Predictor(util_model=None, util_features=(), mem_model=model).save(tmp_path / "p")
    path = tmp_path / "bert_attn.onnx"
    onnx.save(bert_base_shaped(), path)
    base = ["predict", str(path), "--batch", "2", "--seq", "64", "--gpu", "A100-40GB", "--json",
            "--predictor", str(tmp_path / "p")]
    got = {st: json.loads(CliRunner().invoke(app, [*base, "--stack", st]).output)["gpu_mem_mib"]
           for st in ("lazy", "eager", "unknown", "gpumemnet-a100", "lucid")}
    # the stacks differ by their contexts, byte for byte: the lift scales only estimated parts
    assert got["gpumemnet-a100"]["mean"] - got["lazy"]["mean"] == pytest.approx(
        1800.0 - stack_context("lazy", "A100").total_mib)
    diff = stack_context("eager", "A100").total_mib - stack_context("lazy", "A100").total_mib
    assert got["eager"]["mean"] - got["lazy"]["mean"] == pytest.approx(diff)
    # unknown: the largest known context's reserve (Lucid's 2,050 MiB here), the band down to lazy's
    assert got["unknown"]["mean"] == pytest.approx(got["lucid"]["mean"])
    assert got["unknown"]["mean"] > got["gpumemnet-a100"]["mean"]
    assert got["unknown"]["lo"] == pytest.approx(got["lazy"]["lo"]) and got["unknown"]["hi"] > got["eager"]["hi"]
    own = json.loads(CliRunner().invoke(app, [*base, "--stack", "cu121"]).output)
    assert own["gpu_mem_mib"] == got["unknown"]
    assert any(n.startswith("stack 'cu121': no documented context") for n in own["notes"])
