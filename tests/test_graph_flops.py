"""Analytic FLOP counts on tiny hand-built ONNX graphs and on onnx's bundled VGG-19."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlsched.graph import analyze

F = TensorProto.FLOAT


def _init(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _model(nodes, inputs, outputs, inits=(), opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph(nodes, "t", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_conv2d_flops_are_2_macs_plus_bias() -> None:
    m = _model(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", F, ["batch", 3, 8, 8])],
        [helper.make_tensor_value_info("y", F, None)],
        [_init("w", 4, 3, 3, 3), _init("b", 4)],
    )
    a = analyze(m)
    for n in (1, 7):
        out = n * 4 * 8 * 8
        assert a.flops(n) == 2 * out * 3 * 9 + out
    f = a.features(5)
    assert f["n_conv"] == 1 and f["params"] == 4 * 27 + 4
    assert f["flops_conv"] == f["flops"]


def test_grouped_strided_conv() -> None:
    m = _model(
        [helper.make_node("Conv", ["x", "w"], ["y"], group=4, strides=[2, 2], pads=[1, 1, 1, 1])],
        [helper.make_tensor_value_info("x", F, ["N", 8, 16, 16])],
        [helper.make_tensor_value_info("y", F, None)],
        [_init("w", 8, 2, 3, 3)],
    )
    assert analyze(m).flops(3) == 2 * (3 * 8 * 8 * 8) * 2 * 9


def test_gemm_linear() -> None:
    m = _model(
        [helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1)],
        [helper.make_tensor_value_info("x", F, ["batch", 16])],
        [helper.make_tensor_value_info("y", F, None)],
        [_init("w", 8, 16), _init("c", 8)],
    )
    a = analyze(m)
    assert a.flops(10) == 10 * (2 * 8 * 16 + 8)
    assert a.features(10)["n_linear_layers"] == 1


def _attention_model(d: int) -> onnx.ModelProto:
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["scores"]),
        helper.make_node("Softmax", ["scores"], ["p"], axis=-1),
        helper.make_node("MatMul", ["p", "v"], ["y"]),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", "seq", d])],
                  [helper.make_tensor_value_info("y", F, None)],
                  [_init("wq", d, d), _init("wk", d, d), _init("wv", d, d)])


@pytest.mark.parametrize(("b", "s"), [(1, 7), (4, 100), (3, 513)])
def test_attention_block_is_quadratic_in_seq(b: int, s: int) -> None:
    d = 16
    a = analyze(_attention_model(d))
    proj = 3 * 2 * b * s * d * d
    scores = 2 * b * s * s * d
    softmax = 5 * b * s * s
    mix = 2 * b * s * s * d
    assert a.flops(b, s) == pytest.approx(proj + scores + softmax + mix, rel=1e-12)
    f = a.features(b, s)
    assert f["n_matmul"] == 5 and f["n_softmax"] == 1 and f["n_linear_layers"] == 3
    assert f["seq"] == s


def test_lstm_flops_formula() -> None:
    seq, inp, hid = 10, 12, 20
    m = _model(
        [helper.make_node("LSTM", ["x", "w", "r", "b"], ["y"], hidden_size=hid)],
        [helper.make_tensor_value_info("x", F, [seq, "batch", inp])],
        [helper.make_tensor_value_info("y", F, None)],
        [_init("w", 1, 4 * hid, inp), _init("r", 1, 4 * hid, hid), _init("b", 1, 8 * hid)],
    )
    per_step = 2 * 4 * hid * (inp + hid) + 4 * hid + 8 * hid + 4 * hid + 5 * hid
    a = analyze(m)
    assert a.flops(6) == 6 * seq * per_step
    assert a.features(6)["n_lstm"] == 1 and a.features(6)["flops_rnn"] == 6 * seq * per_step


def test_norms_and_pools() -> None:
    nodes = [
        helper.make_node("BatchNormalization", ["x", "g", "bt", "m", "v"], ["y"]),
        helper.make_node("MaxPool", ["y"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["p"], ["gp"]),
        helper.make_node("Relu", ["gp"], ["r"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", F, ["batch", 4, 8, 8])],
               [helper.make_tensor_value_info("r", F, None)],
               [_init(n, 4) for n in ("g", "bt", "m", "v")])
    f = analyze(m).features(2)
    assert f["flops_norm"] == 4 * 2 * 4 * 64          # BN: 4 FLOPs per element
    assert f["flops_pool"] == 2 * 4 * 16 * 4 + 2 * 4 * 16
    assert f["flops_elementwise"] == 2 * 4
    assert (f["n_bn"], f["n_maxpool"], f["n_global_avgpool"], f["n_relu"]) == (1, 1, 1, 1)


def test_layernorm_counts_statistics() -> None:
    m = _model([helper.make_node("LayerNormalization", ["x", "g", "b"], ["y"], axis=-1)],
               [helper.make_tensor_value_info("x", F, ["batch", "seq", 32])],
               [helper.make_tensor_value_info("y", F, None)], [_init("g", 32), _init("b", 32)])
    assert analyze(m).flops(2, 5) == 8 * 2 * 5 * 32


VGG19 = Path(onnx.__file__).parent / "backend/test/data/light/light_vgg19.onnx"


@pytest.mark.skipif(not VGG19.is_file(), reason="onnx wheel without backend test data")
def test_real_vgg19_matches_analytic_count() -> None:
    cfg = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M", 512, 512, 512, 512, "M",
           512, 512, 512, 512, "M"]
    conv, cin, hw = 0, 3, 224
    for v in cfg:
        if v == "M":
            hw //= 2
            continue
        conv += (2 * cin * 9 + 1) * v * hw * hw
        cin = v
    fc = sum(2 * i * o + o for i, o in ((25088, 4096), (4096, 4096), (4096, 1000)))
    a = analyze(VGG19)
    assert a.mode == "scaled"  # fixed batch-1 graph, scaled linearly
    f = a.features(8)
    assert f["flops_conv"] == 8 * conv
    assert f["flops_matmul"] == 8 * fc
    assert (f["n_conv"], f["n_gemm"], f["n_relu"], f["n_maxpool"]) == (16, 3, 18, 5)
