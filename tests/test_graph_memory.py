"""Liveness peak on a hand-built graph, symbolic batch scaling and feature-dict stability."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlsched.graph import FEATURE_NAMES, GraphAnalysis, analyze, horus_memory_mib

F = TensorProto.FLOAT


def _branchy() -> onnx.ModelProto:
    """x(N,16) -Gemm-> a(N,64) -Relu-> b(N,64) -Gemm-> c(N,16); d = c + x.

    Live bytes per step (4-byte floats, per sample): 0: x+a = 320, 1: x+a+b = 576,
    2: x+b+c = 384, 3: x+c+d = 192  ->  peak 576 * N."""
    w1 = numpy_helper.from_array(np.zeros((16, 64), np.float32), "w1")
    w2 = numpy_helper.from_array(np.zeros((64, 16), np.float32), "w2")
    nodes = [helper.make_node("Gemm", ["x", "w1"], ["a"]), helper.make_node("Relu", ["a"], ["b"]),
             helper.make_node("Gemm", ["b", "w2"], ["c"]), helper.make_node("Add", ["c", "x"], ["d"])]
    g = helper.make_graph(nodes, "branchy", [helper.make_tensor_value_info("x", F, ["batch", 16])],
                          [helper.make_tensor_value_info("d", F, None)], initializer=[w1, w2])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_peak_activation_from_liveness() -> None:
    a = analyze(_branchy())
    for n in (1, 3, 64):
        assert a.peak_activation_bytes(n) == 576 * n
    f = a.features(64)
    assert f["peak_activation_bytes"] == 576 * 64
    assert f["activation_bytes"] == (256 + 256 + 64 + 64) * 64   # a, b, c, d
    assert f["input_bytes"] == 64 * 64 and f["output_bytes"] == 64 * 64
    assert f["param_bytes"] == 2 * 16 * 64 * 4 and f["params"] == 2 * 16 * 64


def test_features_are_linear_in_batch_and_stably_ordered() -> None:
    a = analyze(_branchy())
    f1, f8 = a.features(1), a.features(8)
    assert list(f1) == list(FEATURE_NAMES) == GraphAnalysis.feature_names()
    for key in ("flops", "activation_bytes", "peak_activation_bytes", "input_bytes", "flops_per_step"):
        assert f8[key] == pytest.approx(8 * f1[key])
    for key in ("params", "param_bytes", "n_nodes", "n_gemm", "flops_per_sample"):
        assert f8[key] == f1[key]
    assert f8["flops_per_step"] == 3 * f8["flops"]
    assert all(isinstance(v, float) for v in f8.values())


def test_horus_eq2_fallback() -> None:
    f = analyze(_branchy()).features(1024)
    expected = (2 * f["activation_bytes"] + f["param_bytes"]) / 2**20 + 1000.0
    assert horus_memory_mib(f) == pytest.approx(expected)


def test_seq_required_and_default_from_metadata() -> None:
    w = numpy_helper.from_array(np.zeros((8, 8), np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "s",
                          [helper.make_tensor_value_info("x", F, ["batch", "seq", 8])],
                          [helper.make_tensor_value_info("y", F, None)], initializer=[w])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(ValueError, match="seq"):
        analyze(m).features(2)
    helper.set_model_props(m, {"dlsched.default_seq": "12"})
    a = analyze(m)
    assert a.default_seq == 12 and a.features(2)["seq"] == 12
    assert a.flops(2) == 2 * 12 * 2 * 8 * 8
