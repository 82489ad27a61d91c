"""Saved-for-backward accounting (dlsched.graph.saved) on graphs built by hand, against figures
computed by hand here."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlsched.graph import analyze


def _init(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(np.zeros(shape, dtype=np.float32), name)


def _model(nodes: list, inputs: list, outputs: list, inits: list) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def mlp() -> onnx.ModelProto:
    """x[b,784] -> Gemm(256) -> Relu -> Gemm(10) -> Softmax."""
    nodes = [
        helper.make_node("Gemm", ["x", "w1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["r1"]),
        helper.make_node("Gemm", ["r1", "w2", "b2"], ["h2"]),
        helper.make_node("Softmax", ["h2"], ["y"], axis=-1),
    ]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])],
                  [_init("w1", 784, 256), _init("b1", 256), _init("w2", 256, 10), _init("b2", 10)])


def attention(d: int = 64) -> onnx.ModelProto:
    """Single-head self-attention with dropout, residual and LayerNorm; x[b,s,d]."""
    nodes = [
        helper.make_node("MatMul", ["x", "wq"], ["q"]),
        helper.make_node("MatMul", ["x", "wk"], ["k"]),
        helper.make_node("MatMul", ["x", "wv"], ["v"]),
        helper.make_node("Transpose", ["k"], ["kt"], perm=[0, 2, 1]),
        helper.make_node("MatMul", ["q", "kt"], ["s"]),
        helper.make_node("Div", ["s", "scale"], ["sd"]),
        helper.make_node("Softmax", ["sd"], ["p"], axis=-1),
        helper.make_node("Dropout", ["p", "ratio", "train"], ["pd"]),
        helper.make_node("MatMul", ["pd", "v"], ["o"]),
        helper.make_node("Add", ["o", "x"], ["r"]),
        helper.make_node("LayerNormalization", ["r", "gamma", "beta"], ["y"], axis=-1),
    ]
    inits = [_init("wq", d, d), _init("wk", d, d), _init("wv", d, d), _init("gamma", d), _init("beta", d),
             numpy_helper.from_array(np.array(8.0, dtype=np.float32), "scale"),
             numpy_helper.from_array(np.array(0.1, dtype=np.float32), "ratio"),
             numpy_helper.from_array(np.array(True), "train")]
    return _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seq", d])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seq", d])], inits)


def test_mlp_saved_bytes_by_hand() -> None:
    a = analyze(mlp())
    # Gemm1 keeps x (784), Relu keeps r1 (256, which Gemm2 also keeps: once), Softmax keeps y (10);
    # h1 and h2 are not kept (Relu/Softmax need their outputs, not inputs).
    for b in (1, 7, 64):
        assert a.saved_bytes(b) == 4 * b * (784 + 256 + 10)
        # AMP: x and r1 as fp16 copies, the softmax output in fp32
        assert a.saved_bytes(b, amp=True) == b * (2 * (784 + 256) + 4 * 10)
    assert a.params == 784 * 256 + 256 + 256 * 10 + 10
    assert a.max_tensor_bytes(64) == 4 * 64 * 784


def test_attention_saved_bytes_by_hand() -> None:
    a = analyze(attention())
    b, s, d = 2, 16, 64
    bsd, bss = b * s * d, b * s * s
    # x (three MatMuls: once), q, k (through the Transpose view), v, softmax output p, dropout
    # mask (1 byte/elem), dropped pd, residual sum r (LayerNorm input).  s (scores) and sd
    # (divided by a constant) and o (added) are not kept.
    expect = 4 * (5 * bsd + 2 * bss) + bss
    assert expect == 45568
    assert a.saved_bytes(b, seq=s) == expect
    # AMP: x, q, k, v, pd as fp16 copies; p (softmax) and r (LayerNorm) fp32; the mask 1 byte
    assert a.saved_bytes(b, seq=s, amp=True) == 2 * 4 * bsd + 2 * bss + 4 * bss + bss + 4 * bsd
    # the attention probabilities p, their dropout mask and the dropped pd: absent when fused
    assert a.saved_bytes(b, seq=s, attn_only=True) == pytest.approx(4 * bss + bss + 4 * bss)
    assert a.saved_bytes(b, seq=s, amp=True, attn_only=True) == pytest.approx(4 * bss + bss + 2 * bss)
    # far below "every intermediate tensor", which the old memory term summed
    assert a.saved_bytes(b, seq=s) < a.features(b, seq=s)["activation_bytes"]


def test_decomposed_gelu_and_silu_keep_only_their_input() -> None:
    """GELU as the exporter writes it (x/sqrt2 -> Erf -> +1 -> *x -> *0.5) and SiLU (x*sigmoid(x))
    keep x alone, as PyTorch's fused gelu/silu do; the Gemm after each keeps its own input."""
    def c(name, v):
        return numpy_helper.from_array(np.array(v, dtype=np.float32), name)
    nodes = [
        helper.make_node("Div", ["x", "sqrt2"], ["d"]),
        helper.make_node("Erf", ["d"], ["e"]),
        helper.make_node("Add", ["e", "one"], ["e1"]),
        helper.make_node("Mul", ["x", "e1"], ["m"]),
        helper.make_node("Mul", ["m", "half"], ["g"]),
        helper.make_node("Sigmoid", ["g"], ["sg"]),
        helper.make_node("Mul", ["g", "sg"], ["y"]),
        helper.make_node("Gemm", ["y", "w"], ["z"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 32])],
               [helper.make_tensor_value_info("z", TensorProto.FLOAT, ["batch", 8])],
               [c("sqrt2", 1.4142), c("one", 1.0), c("half", 0.5), _init("w", 32, 8)])
    # x (GELU input), g (SiLU input), y (Gemm input): 3 tensors of 32 floats per sample
    assert analyze(m).saved_bytes(5) == 5 * 3 * 32 * 4


def test_constant_of_shape_weights_are_parameters() -> None:
    shape = numpy_helper.from_array(np.array([784, 256], dtype=np.int64), "shape")
    nodes = [
        helper.make_node("ConstantOfShape", ["shape"], ["w1"],
                         value=numpy_helper.from_array(np.array([0.5], dtype=np.float32))),
        helper.make_node("MatMul", ["x", "w1"], ["y"]),
    ]
    m = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 784])],
               [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 256])], [shape])
    a = analyze(m)
    assert a.const_params == 784 * 256
    assert a.params == 784 * 256
    assert a.param_bytes == 4 * 784 * 256 + 2 * 8  # plus the int64 shape initializer
    assert a.saved_bytes(3) == 4 * 3 * 784  # the weight is not an activation


def test_large_models_export_with_external_data() -> None:
    """Over ``large_model_bytes`` the exporter goes through a file and keeps only the graph, so a
    model beyond protobuf's 2 GiB limit exports (here forced with a tiny threshold)."""
    torch = pytest.importorskip("torch")
    from dlsched.graph.export import export_torch_module

    net = torch.nn.Sequential(torch.nn.Linear(64, 512), torch.nn.ReLU(), torch.nn.Linear(512, 10))
    small = export_torch_module(net, torch.randn(2, 64))
    big = export_torch_module(net, torch.randn(2, 64), large_model_bytes=1000)
    assert len(big) < len(small) / 10  # the weights are external, not inline
    model = onnx.load_model_from_string(big)
    assert any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)
    a, b = analyze(small), analyze(big)
    assert a.params == b.params == 64 * 512 + 512 + 512 * 10 + 10
    assert a.saved_bytes(8) == b.saved_bytes(8) == 8 * 4 * (64 + 512)  # x and the Relu output
