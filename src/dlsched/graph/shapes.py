"""Concrete shape (and small-value) propagation for one assignment of the symbolic dims.

Common ops use hand-written rules (fast); every other registered ONNX op goes through onnx's own
per-node inference (``infer_node_outputs``), fed with the values we track for shape arithmetic
(Shape -> Gather -> Concat -> Reshape chains).  An op no schema knows and no value_info describes
stops the analysis with a :class:`GraphError` naming the node."""

from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, defs, helper, numpy_helper, shape_inference

from dlsched.graph.errors import GraphError
from dlsched.graph.prepare import VALUE_LIMIT, NodeRec, Prepared

Shape = tuple[int, ...]
BOOL, INT64 = TensorProto.BOOL, TensorProto.INT64

_SAME_SHAPE = frozenset(
    ["Relu", "LeakyRelu", "Sigmoid", "Tanh", "Elu", "Celu", "Selu", "Gelu", "HardSigmoid", "HardSwish",
     "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Erf", "Neg", "Abs", "Reciprocal", "Sqrt", "Exp",
     "Log", "Sin", "Cos", "Tan", "Floor", "Ceil", "Round", "Sign", "Not", "IsNaN", "IsInf", "Identity",
     "Softmax", "LogSoftmax", "Hardmax", "LRN", "InstanceNormalization", "MeanVarianceNormalization",
     "LpNormalization", "Cast", "CumSum", "Clip"]
)
_BROADCAST = frozenset(
    ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "Equal", "Less", "Greater", "LessOrEqual",
     "GreaterOrEqual", "And", "Or", "Xor", "Where", "Max", "Min", "Sum", "Mean", "PRelu"]
)
_BOOL_OUT = frozenset(["Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "And", "Or", "Xor",
                       "Not", "IsNaN", "IsInf"])


class PassState:
    """Shapes, element types and known small values of every tensor at one evaluation point."""

    __slots__ = ("dtypes", "prep", "shapes", "values")

    def __init__(self, prep: Prepared, dims: dict[str, int]) -> None:
        self.prep = prep
        self.shapes: dict[str, Shape] = dict(prep.init_shapes)
        self.dtypes: dict[str, int] = dict(prep.init_dtypes)
        self.values: dict[str, np.ndarray] = {}
        for spec in prep.inputs:
            self.shapes[spec.name] = tuple(d if isinstance(d, int) else dims[d] for d in spec.dims)
            self.dtypes[spec.name] = spec.dtype

    def value(self, name: str) -> np.ndarray | None:
        """Known value of a tensor (computed, or a small initializer)."""
        v = self.values.get(name)
        if v is None and name in self.prep.init_shapes:
            v = self.prep.init_value(name)
        return v


# ----------------------------------------------------------------------------- shape helpers
def broadcast(shapes: Sequence[Shape], where: str) -> Shape:
    """Numpy-style multidirectional broadcasting."""
    rank = max(len(s) for s in shapes)
    out = []
    for axis in range(rank):
        dim = 1
        for s in shapes:
            k = axis - (rank - len(s))
            if k < 0:
                continue
            d = s[k]
            if d == 1:
                continue
            if dim not in (1, d):
                raise GraphError(f"{where}: cannot broadcast shapes {list(map(list, shapes))}")
            dim = d
        out.append(dim)
    return tuple(out)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _axes(node: NodeRec, st: PassState, pos: int = 1) -> list[int] | None:
    """Axes from the attribute (old opsets) or from input ``pos`` (new opsets)."""
    if "axes" in node.attrs:
        return list(node.attrs["axes"])
    if len(node.inputs) > pos and node.inputs[pos]:
        v = st.value(node.inputs[pos])
        if v is None:
            raise _NeedFallback
        return [int(x) for x in np.asarray(v).reshape(-1)]
    return None


class _NeedFallback(Exception):
    """The fast rule cannot decide; use onnx's own inference for this node."""


# ----------------------------------------------------------------------------- fast rules
def _conv_like(x: Shape, k: Sequence[int], a: dict[str, Any], out_c: int, where: str) -> Shape:
    if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET", b"", ""):
        raise _NeedFallback
    if a.get("ceil_mode", 0):
        raise _NeedFallback
    nsp = len(x) - 2
    pads = list(a.get("pads", [0] * (2 * nsp)))
    strides = list(a.get("strides", [1] * nsp))
    dil = list(a.get("dilations", [1] * nsp))
    sp = []
    for i in range(nsp):
        eff = dil[i] * (k[i] - 1) + 1
        o = (x[2 + i] + pads[i] + pads[i + nsp] - eff) // strides[i] + 1
        if o <= 0:
            raise GraphError(f"{where}: window {k[i]} larger than padded input {x[2 + i]}")
        sp.append(o)
    return (x[0], out_c, *sp)


def _fast(node: NodeRec, ins: list[Shape | None], st: PassState) -> tuple[list[Shape], list[int]] | None:
    """Output shapes and dtypes for common ops, or None when no fast rule exists."""
    op, a = node.op, node.attrs
    x = ins[0] if ins else None
    dt0 = st.dtypes.get(node.inputs[0], TensorProto.FLOAT) if node.inputs and node.inputs[0] else TensorProto.FLOAT
    where = node.where()
    if op in _SAME_SHAPE and x is not None:
        if op == "Cast":
            dt0 = int(a["to"])
        elif op in _BOOL_OUT:
            dt0 = BOOL
        return [x], [dt0]
    if op in _BROADCAST:
        shapes = [s for s in ins if s is not None]
        if op == "Where":
            dt0 = st.dtypes.get(node.inputs[1], TensorProto.FLOAT)
        elif op in _BOOL_OUT:
            dt0 = BOOL
        return [broadcast(shapes, where)], [dt0]
    if op in ("Dropout", "BatchNormalization", "LayerNormalization") and x is not None:
        n_out = len(node.outputs)
        if op == "Dropout":
            return [x, x][:n_out], [dt0, BOOL][:n_out]
        if op == "BatchNormalization":  # training mode adds running mean / variance outputs
            return [x] + [(x[1],)] * (n_out - 1), [dt0] * n_out
        ax = _norm_axis(a.get("axis", -1), len(x))
        stat = (*x[:ax], *([1] * (len(x) - ax)))
        return [x] + [stat] * (n_out - 1), [dt0] * n_out
    if op == "MatMul":
        a_s, b_s = ins[0], ins[1]
        am = a_s if len(a_s) > 1 else (1, *a_s)
        bm = b_s if len(b_s) > 1 else (*b_s, 1)
        if am[-1] != bm[-2]:
            raise GraphError(f"{where}: MatMul inner dims differ {list(a_s)} x {list(b_s)}")
        batch = broadcast([am[:-2], bm[:-2]], where) if (len(am) > 2 or len(bm) > 2) else ()
        out = (*batch, am[-2], bm[-1])
        if len(a_s) == 1:
            out = out[:-2] + out[-1:]
        if len(b_s) == 1:
            out = out[:-1]
        return [out], [dt0]
    if op == "Gemm":
        m = x[1] if a.get("transA", 0) else x[0]
        n = ins[1][0] if a.get("transB", 0) else ins[1][1]
        return [(m, n)], [dt0]
    if op == "Conv":
        w = ins[1]
        return [_conv_like(x, w[2:], a, w[0], where)], [dt0]
    if op in ("MaxPool", "AveragePool", "LpPool"):
        if len([o for o in node.outputs if o]) > 1:
            return None
        return [_conv_like(x, a["kernel_shape"], a, x[1], where)], [dt0]
    if op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
        return [(x[0], x[1], *([1] * (len(x) - 2)))], [dt0]
    if op == "Flatten":
        ax = _norm_axis(a.get("axis", 1), len(x))
        return [(math.prod(x[:ax]), math.prod(x[ax:]))], [dt0]
    if op == "Transpose":
        perm = a.get("perm") or list(range(len(x)))[::-1]
        return [tuple(x[p] for p in perm)], [dt0]
    if op == "Reshape":
        v = st.value(node.inputs[1])
        if v is None:
            raise _NeedFallback
        target = [int(t) for t in np.asarray(v).reshape(-1)]
        allow0 = a.get("allowzero", 0)
        out = [x[i] if (t == 0 and not allow0) else t for i, t in enumerate(target)]
        if -1 in out:
            known = math.prod(d for d in out if d != -1)
            total = math.prod(x)
            if known == 0 or total % known:
                raise GraphError(f"{where}: cannot reshape {list(x)} to {target}")
            out[out.index(-1)] = total // known
        if math.prod(out) != math.prod(x):
            raise GraphError(f"{where}: cannot reshape {list(x)} to {target}")
        return [tuple(out)], [dt0]
    if op == "Unsqueeze":
        axes = _axes(node, st)
        rank = len(x) + len(axes)
        axes = sorted(_norm_axis(ax, rank) for ax in axes)
        out = list(x)
        for ax in axes:
            out.insert(ax, 1)
        return [tuple(out)], [dt0]
    if op == "Squeeze":
        axes = _axes(node, st)
        if axes is None:
            return [tuple(d for d in x if d != 1)], [dt0]
        drop = {_norm_axis(ax, len(x)) for ax in axes}
        return [tuple(d for i, d in enumerate(x) if i not in drop)], [dt0]
    if op == "Concat":
        shapes = [s for s in ins if s is not None]
        ax = _norm_axis(a["axis"], len(shapes[0]))
        out = list(shapes[0])
        out[ax] = sum(s[ax] for s in shapes)
        return [tuple(out)], [dt0]
    if op == "Gather":
        ax = _norm_axis(a.get("axis", 0), len(x))
        return [(*x[:ax], *ins[1], *x[ax + 1:])], [dt0]
    if op == "Shape":
        rank = len(x)
        start = _norm_axis(a.get("start", 0), rank)
        end = _norm_axis(a.get("end", rank), rank) if "end" in a else rank
        return [(max(0, min(end, rank) - max(0, start)),)], [INT64]
    if op == "Size":
        return [()], [INT64]
    if op == "Constant":
        v = _constant_value(node)
        return [tuple(v.shape)], [helper.np_dtype_to_tensor_dtype(v.dtype)]
    if op == "Slice":
        return [_slice_shape(node, x, st)], [dt0]
    if op == "Expand":
        v = st.value(node.inputs[1])
        if v is None:
            raise _NeedFallback
        return [broadcast([x, tuple(int(t) for t in v.reshape(-1))], where)], [dt0]
    if op == "ConstantOfShape":
        v = st.value(node.inputs[0])
        if v is None:
            raise _NeedFallback
        val = a.get("value")
        dt = int(val.data_type) if val is not None else TensorProto.FLOAT
        return [tuple(int(t) for t in v.reshape(-1))], [dt]
    return None


def _slice_shape(node: NodeRec, x: Shape, st: PassState) -> Shape:
    a = node.attrs
    if "starts" in a:  # opset < 10: attributes
        starts, ends = list(a["starts"]), list(a["ends"])
        axes = list(a.get("axes", range(len(starts))))
        steps = [1] * len(starts)
    else:
        vals = [st.value(i) if i else None for i in node.inputs[1:5]]
        if vals[0] is None or vals[1] is None or any(v is None for i, v in zip(node.inputs[3:5], vals[2:]) if i):
            raise _NeedFallback
        starts, ends = vals[0].reshape(-1).tolist(), vals[1].reshape(-1).tolist()
        axes = vals[2].reshape(-1).tolist() if len(vals) > 2 and vals[2] is not None else list(range(len(starts)))
        steps = vals[3].reshape(-1).tolist() if len(vals) > 3 and vals[3] is not None else [1] * len(starts)
    out = list(x)
    for s0, e0, ax, step in zip(starts, ends, axes, steps):
        ax = _norm_axis(int(ax), len(x))
        out[ax] = len(range(*slice(int(s0), int(e0), int(step)).indices(x[ax])))
    return tuple(out)


def _constant_value(node: NodeRec) -> np.ndarray:
    if node.const is None:
        node.const = _decode_constant(node)
    return node.const


def _decode_constant(node: NodeRec) -> np.ndarray:
    a = node.attrs
    if "value" in a:
        return numpy_helper.to_array(a["value"])
    for key, dt in (("value_float", np.float32), ("value_int", np.int64)):
        if key in a:
            return np.array(a[key], dtype=dt)
    for key, dt in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in a:
            return np.array(list(a[key]), dtype=dt)
    raise _NeedFallback


# ----------------------------------------------------------------------------- value rules
def _np_dtype(dt: int) -> Any:
    return helper.tensor_dtype_to_np_dtype(dt)


def _div(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    if np.issubdtype(x.dtype, np.integer):
        return np.trunc(x / y).astype(x.dtype)
    return x / y


def _slice_value(node: NodeRec, vals: list[np.ndarray | None], st: PassState) -> np.ndarray:
    x = vals[0]
    if "starts" in node.attrs:  # opset < 10
        starts, ends = node.attrs["starts"], node.attrs["ends"]
        axes = node.attrs.get("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts, ends = vals[1].tolist(), vals[2].tolist()
        axes = vals[3].tolist() if len(vals) > 3 and vals[3] is not None else list(range(len(starts)))
        steps = vals[4].tolist() if len(vals) > 4 and vals[4] is not None else [1] * len(starts)
    idx = [slice(None)] * x.ndim
    for s, e, ax, step in zip(starts, ends, axes, steps):
        idx[_norm_axis(int(ax), x.ndim)] = slice(int(s), int(e), int(step))
    return x[tuple(idx)]


def _range_value(vals: list[np.ndarray]) -> np.ndarray:
    start, limit, delta = (v.item() for v in vals[:3])
    return np.arange(start, limit, delta, dtype=vals[0].dtype)


_VALUE_FNS: dict[str, Callable[[NodeRec, list, PassState], np.ndarray]] = {
    "Identity": lambda n, v, st: v[0],
    "Cast": lambda n, v, st: v[0].astype(_np_dtype(int(n.attrs["to"]))),
    "Gather": lambda n, v, st: np.take(v[0], v[1].astype(np.int64), axis=n.attrs.get("axis", 0)),
    "Concat": lambda n, v, st: np.concatenate([x for x in v if x is not None], axis=n.attrs["axis"]),
    "Unsqueeze": lambda n, v, st: v[0].reshape(st.shapes[n.outputs[0]]),
    "Squeeze": lambda n, v, st: v[0].reshape(st.shapes[n.outputs[0]]),
    "Reshape": lambda n, v, st: v[0].reshape(st.shapes[n.outputs[0]]),
    "Flatten": lambda n, v, st: v[0].reshape(st.shapes[n.outputs[0]]),
    "Slice": _slice_value,
    "Add": lambda n, v, st: v[0] + v[1],
    "Sub": lambda n, v, st: v[0] - v[1],
    "Mul": lambda n, v, st: v[0] * v[1],
    "Div": lambda n, v, st: _div(v[0], v[1]),
    "Neg": lambda n, v, st: -v[0],
    "Abs": lambda n, v, st: np.abs(v[0]),
    "Floor": lambda n, v, st: np.floor(v[0]),
    "Ceil": lambda n, v, st: np.ceil(v[0]),
    "Sqrt": lambda n, v, st: np.sqrt(v[0]),
    "Equal": lambda n, v, st: np.equal(v[0], v[1]),
    "Less": lambda n, v, st: np.less(v[0], v[1]),
    "Greater": lambda n, v, st: np.greater(v[0], v[1]),
    "Not": lambda n, v, st: np.logical_not(v[0]),
    "And": lambda n, v, st: np.logical_and(v[0], v[1]),
    "Or": lambda n, v, st: np.logical_or(v[0], v[1]),
    "Where": lambda n, v, st: np.where(v[0], v[1], v[2]),
    "Max": lambda n, v, st: np.maximum.reduce([x for x in v if x is not None]),
    "Min": lambda n, v, st: np.minimum.reduce([x for x in v if x is not None]),
    "Range": lambda n, v, st: _range_value(v),
    "Transpose": lambda n, v, st: np.transpose(v[0], n.attrs.get("perm")),
    "Expand": lambda n, v, st: np.broadcast_to(v[0], st.shapes[n.outputs[0]]).copy(),
    "Tile": lambda n, v, st: np.tile(v[0], v[1].astype(np.int64).tolist()),
    "ConstantOfShape": lambda n, v, st: np.full(
        st.shapes[n.outputs[0]],
        numpy_helper.to_array(n.attrs["value"]).reshape(-1)[0] if n.attrs.get("value") is not None else 0.0,
        dtype=_np_dtype(st.dtypes[n.outputs[0]]),
    ),
}


# ----------------------------------------------------------------------------- fallback
def _type_proto(shape: Shape, dtype: int) -> onnx.TypeProto:
    return helper.make_tensor_type_proto(dtype, list(shape))


def _fallback(node: NodeRec, st: PassState, dims: dict[str, int]) -> tuple[list[Shape], list[int]]:
    """onnx's own per-node inference; value_info for ops no schema describes."""
    prep = st.prep
    domain = "" if node.domain == "ai.onnx" else node.domain
    version = prep.opsets.get(domain)
    schema = None
    if version is not None:
        try:
            schema = defs.get_schema(node.op, version, domain)
        except Exception:  # noqa: BLE001 - SchemaError: unregistered op
            schema = None
    if schema is not None:
        types = {}
        data = {}
        for i in node.inputs:
            if not i:
                continue
            types[i] = _type_proto(st.shapes[i], st.dtypes[i])
            v = st.value(i)
            if v is not None:
                data[i] = numpy_helper.from_array(np.asarray(v), i)
        try:
            res = shape_inference.infer_node_outputs(schema, node.proto, types, data)
        except Exception as exc:
            raise GraphError(f"{prep.label}: shape inference failed at {node.where()}: {exc}") from exc
        shapes, dtypes = [], []
        for o in node.outputs:
            if not o:
                shapes.append(())
                dtypes.append(TensorProto.FLOAT)
                continue
            tp = res.get(o)
            shape = _concrete(tp, dims) if tp is not None else None
            if shape is None:
                raise GraphError(
                    f"{prep.label}: cannot infer the shape of output '{o}' of {node.where()} "
                    "(its size depends on tensor values that are not known before running the model)"
                )
            shapes.append(shape)
            dtypes.append(int(tp.tensor_type.elem_type))
        return shapes, dtypes
    # unregistered op: accept shapes only if the model's value_info spells them out
    shapes, dtypes = [], []
    for o in node.outputs:
        tp = prep.value_info.get(o)
        shape = _concrete(tp, dims) if tp is not None else None
        if shape is None:
            raise GraphError(
                f"{prep.label}: unknown op '{node.op}' (domain '{node.domain or 'ai.onnx'}', opset "
                f"{version}) at node '{node.name}': no ONNX schema and no value_info shape for output '{o}'"
            )
        shapes.append(shape)
        dtypes.append(int(tp.tensor_type.elem_type))
    return shapes, dtypes


def _concrete(tp: onnx.TypeProto, dims: dict[str, int]) -> Shape | None:
    if not tp.HasField("tensor_type") or not tp.tensor_type.HasField("shape"):
        return None
    out = []
    for d in tp.tensor_type.shape.dim:
        if d.HasField("dim_value"):
            out.append(int(d.dim_value))
        elif d.dim_param in dims:
            out.append(dims[d.dim_param])
        else:
            return None
    return tuple(out)


# ----------------------------------------------------------------------------- the pass
def run_pass(
    prep: Prepared, dims: dict[str, int], visit: Callable[[NodeRec, list, list, PassState], None]
) -> PassState:
    """Propagate shapes through the graph; ``visit(node, in_shapes, out_shapes, state)`` per node."""
    st = PassState(prep, dims)
    shapes, dtypes, values = st.shapes, st.dtypes, st.values
    for node in prep.nodes:
        try:
            ins = [shapes[i] if i else None for i in node.inputs]
        except KeyError as exc:
            raise GraphError(f"{prep.label}: {node.where()} uses undefined tensor '{exc.args[0]}'") from None
        res = None
        if node.domain in ("", "ai.onnx"):
            try:
                res = _fast(node, ins, st)
            except _NeedFallback:
                res = None
            except (IndexError, KeyError, TypeError) as exc:
                raise GraphError(f"{prep.label}: malformed {node.where()}: {exc!r}") from None
        if res is None:
            res = _fallback(node, st, dims)
        out_shapes, out_dtypes = res
        for o, s, d in zip(node.outputs, out_shapes, out_dtypes):
            if o:
                shapes[o] = s
                dtypes[o] = d
        if node.op == "Constant":
            values[node.outputs[0]] = _constant_value(node)
        else:
            fn = _VALUE_FNS.get(node.op)
            if fn is not None and len(node.outputs) == 1 and math.prod(out_shapes[0]) <= VALUE_LIMIT:
                vals = [st.value(i) if i else None for i in node.inputs]
                if all(v is not None for i, v in zip(node.inputs, vals) if i):
                    # a failing evaluation only leaves the value unknown; shapes are already right
                    with contextlib.suppress(Exception):
                        values[node.outputs[0]] = np.asarray(fn(node, vals, st))
            elif node.op == "Shape":
                x = ins[0]
                rank = len(x)
                start = _norm_axis(node.attrs.get("start", 0), rank)
                end = _norm_axis(node.attrs["end"], rank) if "end" in node.attrs else rank
                values[node.outputs[0]] = np.array(x[max(0, start):min(end, rank)], dtype=np.int64)
            elif node.op == "Size":
                values[node.outputs[0]] = np.array(math.prod(ins[0]), dtype=np.int64)
        visit(node, ins, out_shapes, st)
    return st
