"""One-off preparation of a loaded model: topological order, parsed attributes, initializer
metadata, the static (weights-only) sub-graph and the symbolic input dimensions.

Done once per model so that the several shape-propagation passes only do arithmetic."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from dlsched.graph.errors import GraphError

#: Tensors up to this many elements carry values through the passes (shape arithmetic).
VALUE_LIMIT = 4096


@dataclass(slots=True)
class NodeRec:
    """A graph node with attributes decoded once."""

    index: int
    name: str
    op: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: dict[str, Any]
    proto: onnx.NodeProto
    const: Any = None  # decoded value of a Constant node (cached across passes)

    def where(self) -> str:
        """Human-readable location for error messages."""
        dom = f", domain '{self.domain}'" if self.domain not in ("", "ai.onnx") else ""
        return f"node '{self.name}' (op '{self.op}'{dom})"


@dataclass(slots=True)
class InputSpec:
    """A graph input: dims are ints or symbol names (dim_param)."""

    name: str
    dims: tuple[int | str, ...]
    dtype: int


@dataclass(slots=True)
class Prepared:
    """Everything the passes need, derived once from the ModelProto."""

    label: str
    opsets: dict[str, int]
    nodes: list[NodeRec]
    inputs: list[InputSpec]
    outputs: list[str]
    init_shapes: dict[str, tuple[int, ...]]
    init_dtypes: dict[str, int]
    init_protos: dict[str, onnx.TensorProto]
    static: set[str]
    value_info: dict[str, onnx.TypeProto]
    _values: dict[str, np.ndarray] = field(default_factory=dict)

    def init_value(self, name: str) -> np.ndarray | None:
        """Value of a small, inline initializer (cached), else ``None``."""
        if name in self._values:
            return self._values[name]
        proto = self.init_protos.get(name)
        if proto is None or proto.data_location == onnx.TensorProto.EXTERNAL:
            return None
        if int(np.prod(self.init_shapes[name], dtype=np.int64)) > VALUE_LIMIT:
            return None
        try:
            val = numpy_helper.to_array(proto)
        except Exception:  # noqa: BLE001 - odd dtypes: treat as unknown value
            return None
        self._values[name] = val
        return val


def _attrs(node: onnx.NodeProto) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for a in node.attribute:
        if a.type in (onnx.AttributeProto.GRAPH, onnx.AttributeProto.GRAPHS):
            out[a.name] = None  # sub-graphs are not analysed (control flow is reported as unknown)
            continue
        out[a.name] = helper.get_attribute_value(a)
    return out


def _dims(vi: onnx.ValueInfoProto, label: str) -> tuple[tuple[int | str, ...], int]:
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type"):
        raise GraphError(f"{label}: graph input '{vi.name}' is not a tensor (sequence/map inputs unsupported)")
    if not tt.HasField("shape"):
        raise GraphError(f"{label}: graph input '{vi.name}' has no shape; export it with a static or named shape")
    dims: list[int | str] = []
    for axis, d in enumerate(tt.shape.dim):
        if d.HasField("dim_value"):
            dims.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            dims.append(d.dim_param)
        else:
            raise GraphError(
                f"{label}: graph input '{vi.name}' axis {axis} has neither a size nor a name; "
                "give it a dim_param such as 'batch'"
            )
    return tuple(dims), int(tt.elem_type)


def _toposort(nodes: list[NodeRec], available: set[str], label: str) -> list[NodeRec]:
    """Keep file order when it is already topological (the common case); otherwise sort."""
    have = set(available)
    ok = True
    for n in nodes:
        if any(i and i not in have for i in n.inputs):
            ok = False
            break
        have.update(o for o in n.outputs if o)
    if ok:
        return nodes
    producers = {o: n for n in nodes for o in n.outputs if o}
    order: list[NodeRec] = []
    state: dict[int, int] = {}
    for root in nodes:
        stack: list[tuple[NodeRec, int]] = [(root, 0)]
        while stack:
            n, i = stack.pop()
            if state.get(n.index) == 2:
                continue
            if i == 0:
                if state.get(n.index) == 1:
                    raise GraphError(f"{label}: the graph has a cycle through {n.where()}")
                state[n.index] = 1
            missing = [x for x in n.inputs if x and x not in available and x not in producers]
            if missing:
                raise GraphError(f"{label}: {n.where()} uses undefined tensor '{missing[0]}'")
            deps = [producers[x] for x in n.inputs if x and x not in available]
            if i < len(deps):
                stack.append((n, i + 1))
                if state.get(deps[i].index) != 2:
                    if state.get(deps[i].index) == 1:
                        raise GraphError(f"{label}: the graph has a cycle through {deps[i].where()}")
                    stack.append((deps[i], 0))
                continue
            state[n.index] = 2
            order.append(n)
    for new_i, n in enumerate(order):
        n.index = new_i
    return order


def prepare(model: onnx.ModelProto, label: str) -> Prepared:
    """Decode the graph once; raise :class:`GraphError` on structural problems."""
    g = model.graph
    init_shapes = {t.name: tuple(int(d) for d in t.dims) for t in g.initializer}
    init_dtypes = {t.name: int(t.data_type) for t in g.initializer}
    init_protos = {t.name: t for t in g.initializer}
    inputs = []
    for vi in g.input:
        if vi.name in init_shapes:
            continue  # old exporters list initializers as inputs too
        dims, dt = _dims(vi, label)
        inputs.append(InputSpec(vi.name, dims, dt))
    nodes = []
    for i, n in enumerate(g.node):
        name = n.name or f"{n.op_type}_{i}"
        nodes.append(NodeRec(i, name, n.op_type, n.domain, tuple(n.input), tuple(n.output), _attrs(n), n))
    available = set(init_shapes) | {s.name for s in inputs}
    nodes = _toposort(nodes, available, label)
    static = set(init_shapes)
    for n in nodes:
        if n.op == "Constant" or (n.inputs and all((not i) or i in static for i in n.inputs)
                                  and n.op not in ("RandomNormal", "RandomUniform")):
            static.update(o for o in n.outputs if o)
    value_info = {vi.name: vi.type for vi in list(g.value_info) + list(g.output)}
    opsets = {("" if imp.domain == "ai.onnx" else imp.domain): int(imp.version) for imp in model.opset_import}
    return Prepared(
        label=label, opsets=opsets, nodes=nodes, inputs=inputs, outputs=[o.name for o in g.output],
        init_shapes=init_shapes, init_dtypes=init_dtypes, init_protos=init_protos, static=static,
        value_info=value_info,
    )


_BATCH_NAMES = frozenset(["batch", "batch_size", "batchsize", "bs", "b", "n", "num_samples"])


def symbol_roles(prep: Prepared, fixed_dims: Mapping[str, int] | None) -> dict[str, str]:
    """Map each input dim_param to 'b' or 's' unless pinned: a batch-like name ('batch', 'N',
    'batch_size', ...) is the batch wherever it sits (e.g. axis 1 of a time-major LSTM input);
    other names are the batch on axis 0 and the sequence on any other axis."""
    roles: dict[str, str] = {}
    fixed = fixed_dims or {}
    for spec in prep.inputs:
        for axis, d in enumerate(spec.dims):
            if isinstance(d, str) and d not in fixed and d not in roles:
                batchy = d.lower() in _BATCH_NAMES or d.lower().startswith("batch")
                roles[d] = "b" if (batchy or axis == 0) else "s"
    return roles
