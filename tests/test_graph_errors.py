"""Bad inputs raise GraphError with a message that names the file, node and op."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from dlsched.graph import GraphError, analyze

F = TensorProto.FLOAT


def _relu_model(opset: int = 17) -> onnx.ModelProto:
    g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="r")], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 4])],
                          [helper.make_tensor_value_info("y", F, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def test_graph_error_is_value_error() -> None:
    assert issubclass(GraphError, ValueError)


def test_corrupt_bytes() -> None:
    with pytest.raises(GraphError, match="<bytes>"):
        analyze(b"\xff\xfe this is not protobuf \x00\x01")


def test_truncated_file_names_the_file(tmp_path: Path) -> None:
    p = tmp_path / "cut.onnx"
    p.write_bytes(_relu_model().SerializeToString()[:-7])
    with pytest.raises(GraphError, match="cut.onnx"):
        analyze(p)


def test_missing_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(GraphError, match="no such ONNX file"):
        analyze(tmp_path / "nope.onnx")
    (tmp_path / "empty.onnx").write_bytes(b"")
    with pytest.raises(GraphError, match="empty"):
        analyze(tmp_path / "empty.onnx")


@pytest.mark.parametrize("opset", [5, 99])
def test_unsupported_opset(opset: int) -> None:
    with pytest.raises(GraphError, match=f"unsupported opset {opset}"):
        analyze(_relu_model(opset))


def _custom(op: str, domain: str, with_shape: bool) -> onnx.ModelProto:
    n = helper.make_node(op, ["x"], ["y"], name="mystery", domain=domain)
    out = helper.make_tensor_value_info("y", F, ["batch", 4] if with_shape else None)
    g = helper.make_graph([n, helper.make_node("Relu", ["y"], ["z"])], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 4])],
                          [helper.make_tensor_value_info("z", F, None)])
    if with_shape:
        g.value_info.append(out)
    opsets = [helper.make_opsetid("", 17)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    return helper.make_model(g, opset_imports=opsets)


def test_unknown_op_without_shapes_names_node_and_op() -> None:
    with pytest.raises(GraphError, match=r"unknown op 'FooBar'.*com\.example.*node 'mystery'"):
        analyze(_custom("FooBar", "com.example", with_shape=False))


def test_unknown_op_with_value_info_is_counted_not_ignored() -> None:
    a = analyze(_custom("FooBar", "com.example", with_shape=True))
    assert a.unknown_ops == {"com.example:FooBar": 1}
    assert a.features(3)["n_unknown_ops"] == 1
    with pytest.raises(GraphError, match="FooBar"):
        analyze(_custom("FooBar", "com.example", with_shape=True), strict=True)


def test_standard_op_without_flop_rule_is_reported() -> None:
    a = analyze(_custom("Shrink", "", with_shape=False))
    assert a.unknown_ops == {"Shrink": 1}
    with pytest.raises(GraphError, match=r"node 'mystery' \(op 'Shrink'\)"):
        analyze(_custom("Shrink", "", with_shape=False), strict=True)


def test_input_without_dim_size_or_name() -> None:
    m = _relu_model()
    m.graph.input[0].type.tensor_type.shape.dim[1].Clear()
    with pytest.raises(GraphError, match="'x' axis 1"):
        analyze(m)


def test_data_dependent_shape_names_the_node() -> None:
    g = helper.make_graph([helper.make_node("Reshape", ["x", "shape"], ["y"], name="reshape_from_input")], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 4]),
                           helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
                          [helper.make_tensor_value_info("y", F, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(GraphError, match=r"node 'reshape_from_input' \(op 'Reshape'\)"):
        analyze(m)


def test_undefined_tensor_and_bad_broadcast() -> None:
    g = helper.make_graph([helper.make_node("Add", ["x", "ghost"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 4])],
                          [helper.make_tensor_value_info("y", F, None)])
    with pytest.raises(GraphError, match="ghost"):
        analyze(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    w = numpy_helper.from_array(np.zeros((3,), np.float32), "w")
    g = helper.make_graph([helper.make_node("Add", ["x", "w"], ["y"], name="add")], "g",
                          [helper.make_tensor_value_info("x", F, ["batch", 4])],
                          [helper.make_tensor_value_info("y", F, None)], initializer=[w])
    with pytest.raises(GraphError, match=r"node 'add' \(op 'Add'\).*broadcast"):
        analyze(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
