"""``analyze(model) -> GraphAnalysis``: FLOPs, memory and op-count features of an ONNX graph,
kept symbolic in batch (and sequence) so one analysis serves every batch size."""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import onnx

from dlsched.graph import ops
from dlsched.graph.errors import GraphError
from dlsched.graph.features import FEATURE_NAMES
from dlsched.graph.flops import TRAIN_STEP_FACTOR, node_flops
from dlsched.graph.loader import ModelSource, default_opset, load_model
from dlsched.graph.poly import B_POINTS, MONOS_B, MONOS_BS, S_POINTS, Monomial, fit, monomial_vector
from dlsched.graph.prepare import NodeRec, Prepared, prepare, symbol_roles
from dlsched.graph.saved import attention_softmaxes, saved_tensors
from dlsched.graph.shapes import PassState, run_pass

FLOAT_TYPES = frozenset([onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.DOUBLE,
                         onnx.TensorProto.BFLOAT16])
_ITEMSIZE = {1: 4, 2: 1, 3: 1, 4: 2, 5: 2, 6: 4, 7: 8, 8: 8, 9: 1, 10: 2, 11: 8, 12: 4, 13: 8, 14: 8,
             15: 16, 16: 2, 17: 1, 18: 1, 19: 1, 20: 1, 21: 1, 22: 1, 23: 1, 24: 1, 25: 1, 26: 1}
#: metadata_props key the exporters use to record the sequence length a model was built for.
SEQ_META_KEY = "dlsched.default_seq"


def itemsize(dtype: int) -> int:
    """Bytes per element of an ONNX element type (sub-byte types rounded up to 1)."""
    return _ITEMSIZE.get(dtype, 4)


@dataclass(slots=True)
class GraphAnalysis:
    """Result of :func:`analyze`.  Counts are stored as polynomial coefficients over
    ``monomials`` (powers of batch b and sequence s); :meth:`features` evaluates them."""

    name: str
    opset: int
    mode: str                           # "symbolic": batch is a named dim; "scaled": fixed-batch graph
    symbols: dict[str, str]             # input dim_param -> "b" or "s"
    default_seq: int | None
    monomials: tuple[Monomial, ...]
    flops_coef: dict[str, np.ndarray]   # category -> coefficients (forward FLOPs)
    activation_coef: np.ndarray
    input_bytes_coef: np.ndarray
    input_elems_coef: np.ndarray
    output_bytes_coef: np.ndarray
    live_coef: np.ndarray               # (n_nodes, n_monomials): live activation bytes at each step
    params: int
    param_bytes: int
    op_counts: dict[str, int]
    unknown_ops: dict[str, int]
    layer_counts: dict[str, int]
    node_names: list[str]
    node_ops: list[str]
    node_flops_coef: np.ndarray         # (n_nodes, n_monomials)
    node_bytes_coef: np.ndarray         # (n_nodes, n_monomials): bytes each node reads and writes
    node_kernels: np.ndarray            # (n_nodes,) bool: the node runs a device kernel in eager mode
    node_weight_bytes: np.ndarray       # (n_nodes,) bytes of static inputs (weights) each node reads
    elapsed_s: float = 0.0
    inputs: dict[str, tuple[int | str, ...]] = field(default_factory=dict)
    #: bytes autograd keeps for backward (dlsched.graph.saved), fp32 training and under AMP
    saved_coef: np.ndarray | None = None
    saved_amp_coef: np.ndarray | None = None
    #: the part of the above that is attention probabilities (absent with fused attention kernels)
    saved_attn_coef: np.ndarray | None = None
    saved_attn_amp_coef: np.ndarray | None = None
    #: the part kept by convolutions and batch norms
    saved_conv_coef: np.ndarray | None = None
    saved_conv_amp_coef: np.ndarray | None = None
    #: bytes of the largest single activation tensor: the transient a backward step adds on top
    max_tensor_coef: np.ndarray | None = None
    #: bytes of the per-row statistics (fp32 log-sum-exp) a fused attention kernel keeps instead
    #: of the attention matrices, and how many attention calls the graph has
    attn_rows_coef: np.ndarray | None = None
    attn_layers: int = 0
    #: bytes of the largest graph output (the logits a loss reads: vocabulary-sized for an LM head)
    loss_output_coef: np.ndarray | None = None
    #: parameters stored as ConstantOfShape outputs (already included in ``params``)
    const_params: int = 0

    # ------------------------------------------------------------------ training memory
    def saved_bytes(self, batch: int, seq: int | None = None, amp: bool = False, attn_only: bool = False,
                    conv_only: bool = False) -> float:
        """Activation bytes autograd keeps for the backward pass at this batch (and sequence);
        ``attn_only``: just the attention probabilities; ``conv_only``: just what convolutions and
        batch norms keep."""
        if attn_only:
            coef = self.saved_attn_amp_coef if amp else self.saved_attn_coef
        elif conv_only:
            coef = self.saved_conv_amp_coef if amp else self.saved_conv_coef
        else:
            coef = self.saved_amp_coef if amp else self.saved_coef
        if coef is None:
            raise ValueError(f"{self.name}: analysis has no saved-for-backward figures")
        m, _ = self._mono(batch, seq)
        return max(0.0, float(coef @ m))

    def max_tensor_bytes(self, batch: int, seq: int | None = None) -> float:
        """Size of the largest activation tensor at this batch (and sequence)."""
        if self.max_tensor_coef is None:
            return 0.0
        m, _ = self._mono(batch, seq)
        return max(0.0, float(self.max_tensor_coef @ m))

    # ------------------------------------------------------------------ evaluation
    @property
    def has_seq(self) -> bool:
        """Whether some input dimension is a sequence length."""
        return any(j > 0 for _, j in self.monomials)

    def _mono(self, batch: int, seq: int | None) -> tuple[np.ndarray, int]:
        if batch < 1:
            raise ValueError(f"batch must be >= 1, got {batch}")
        s = 0
        if self.has_seq:
            s = seq if seq is not None else self.default_seq
            if s is None:
                raise ValueError(f"{self.name} has a symbolic sequence length: pass seq=")
            if s < 1:
                raise ValueError(f"seq must be >= 1, got {s}")
        return monomial_vector(self.monomials, batch, s), s

    def flops(self, batch: int, seq: int | None = None) -> float:
        """Forward FLOPs for a whole batch."""
        m, _ = self._mono(batch, seq)
        return float(sum(c @ m for c in self.flops_coef.values()))

    def peak_activation_bytes(self, batch: int, seq: int | None = None) -> float:
        """Largest total size of simultaneously live activations (forward, no in-place reuse)."""
        m, _ = self._mono(batch, seq)
        return float((self.live_coef @ m).max()) if len(self.live_coef) else 0.0

    def node_flops(self, batch: int, seq: int | None = None) -> list[tuple[str, str, float]]:
        """(node name, op, forward FLOPs) per node, in topological order."""
        m, _ = self._mono(batch, seq)
        vals = self.node_flops_coef @ m
        return list(zip(self.node_names, self.node_ops, vals.tolist()))

    def features(self, batch: int, seq: int | None = None) -> dict[str, float]:
        """Flat feature dict with keys exactly :data:`FEATURE_NAMES`, in that order."""
        m, s = self._mono(batch, seq)
        cat = {c: float(self.flops_coef[c] @ m) for c in ops.CATEGORIES}
        fwd = sum(cat.values())
        act = float(self.activation_coef @ m)
        out: dict[str, float] = {
            "batch": float(batch),
            "seq": float(s),
            "flops": fwd,
            "flops_per_sample": fwd / batch,
            "flops_per_step": TRAIN_STEP_FACTOR * fwd,
            "params": float(self.params),
            "param_bytes": float(self.param_bytes),
            "model_size_mb": self.param_bytes / 2**20,
            "activation_bytes": act,
            "activation_bytes_per_sample": act / batch,
            "peak_activation_bytes": float((self.live_coef @ m).max()) if len(self.live_coef) else 0.0,
            "input_elements": float(self.input_elems_coef @ m),
            "input_bytes": float(self.input_bytes_coef @ m),
            "output_bytes": float(self.output_bytes_coef @ m),
            "n_nodes": float(len(self.node_ops)),
            **{k: float(v) for k, v in self.layer_counts.items()},
            "n_unknown_ops": float(sum(self.unknown_ops.values())),
        }
        for c in ops.CATEGORIES:
            out[f"flops_{c}"] = cat[c]
        k = self.node_kernels
        out["n_kernels"] = float(k.sum())
        out["bytes_accessed"] = float(self.node_bytes_coef[k].sum(axis=0) @ m + self.node_weight_bytes[k].sum())
        out["flops_tensor"] = sum(cat[c] for c in ops.TENSOR_CATEGORIES)
        for op, key in ops.OP_COUNT_FEATURES.items():
            out[key] = float(self.op_counts.get(op, 0))
        has_saved = self.saved_coef is not None
        out["saved_bytes"] = self.saved_bytes(batch, seq) if has_saved else 0.0
        out["saved_bytes_amp"] = self.saved_bytes(batch, seq, amp=True) if has_saved else 0.0
        out["max_tensor_bytes"] = self.max_tensor_bytes(batch, seq)
        has_attn = self.saved_attn_coef is not None
        out["saved_attn_bytes"] = self.saved_bytes(batch, seq, attn_only=True) if has_attn else 0.0
        out["saved_attn_bytes_amp"] = self.saved_bytes(batch, seq, amp=True, attn_only=True) if has_attn else 0.0
        out["saved_attn_rows_bytes"] = (max(0.0, float(self.attn_rows_coef @ m))
                                        if self.attn_rows_coef is not None else 0.0)
        out["attn_layers"] = float(self.attn_layers)
        out["loss_output_bytes"] = (max(0.0, float(self.loss_output_coef @ m))
                                    if self.loss_output_coef is not None else 0.0)
        has_conv = self.saved_conv_coef is not None
        out["saved_conv_bytes"] = self.saved_bytes(batch, seq, conv_only=True) if has_conv else 0.0
        out["saved_conv_bytes_amp"] = self.saved_bytes(batch, seq, amp=True, conv_only=True) if has_conv else 0.0
        return {k: out[k] for k in FEATURE_NAMES}

    @staticmethod
    def feature_names() -> list[str]:
        """Names (and order) of the keys returned by :meth:`features`."""
        return list(FEATURE_NAMES)


# ---------------------------------------------------------------------- analysis
def _layer_counts(prep: Prepared) -> dict[str, int]:
    conv = lin = act = norm = other = 0
    for n in prep.nodes:
        op = n.op
        if op in ops.CONV_OPS:
            conv += 1
        elif op == "Gemm" or (op in ("MatMul", "Einsum") and any(i in prep.static for i in n.inputs if i)):
            lin += 1
        elif op in ops.ACTIVATION_OPS:
            act += 1
        elif op in ops.NORM_OPS:
            norm += 1
        elif (op in ops.POOL_OPS or op in ops.RNN_OPS or op in ops.SOFTMAX_OPS or op in ops.ATTENTION_OPS
              or (op == "Gather" and n.inputs[0] in prep.init_shapes and len(prep.init_shapes[n.inputs[0]]) == 2)):
            other += 1
    return {"n_conv_layers": conv, "n_linear_layers": lin, "n_activations": act,
            "n_norm_layers": norm, "n_other_layers": other}


def _const_params(prep: Prepared, st: PassState) -> tuple[int, int]:
    """Float tensors made by ``ConstantOfShape`` from constant shapes and read by a compute op:
    weights stored that way (the onnx package's "light" test models) are parameters too."""
    readers: dict[str, set[str]] = {}
    for n in prep.nodes:
        for i in n.inputs:
            readers.setdefault(i, set()).add(n.op)
    elems = nbytes = 0
    for n in prep.nodes:
        if n.op != "ConstantOfShape" or not n.outputs or n.outputs[0] not in prep.static:
            continue
        out = n.outputs[0]
        if st.dtypes.get(out) not in FLOAT_TYPES or not (readers.get(out, set()) - set(ops.HOST_OPS)):
            continue
        size = math.prod(st.shapes.get(out, ()))
        if size > 1:
            elems += size
            nbytes += size * itemsize(st.dtypes[out])
    return elems, nbytes


def _params(prep: Prepared) -> tuple[int, int]:
    """Float parameter elements and bytes of all initializers; Identity aliases of initializers
    (the torch exporter de-duplicates equal tensors that way) count as parameters of their own."""
    params = sum(math.prod(s) for k, s in prep.init_shapes.items() if prep.init_dtypes[k] in FLOAT_TYPES)
    nbytes = sum(math.prod(s) * itemsize(prep.init_dtypes[k]) for k, s in prep.init_shapes.items())
    for n in prep.nodes:
        if n.op == "Identity" and n.inputs and n.inputs[0] in prep.init_shapes:
            src = n.inputs[0]
            size = math.prod(prep.init_shapes[src])
            nbytes += size * itemsize(prep.init_dtypes[src])
            if prep.init_dtypes[src] in FLOAT_TYPES:
                params += size
    return params, nbytes


def _tensors(prep: Prepared) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Activation tensors (graph inputs + non-static node outputs) with live intervals."""
    n_nodes = len(prep.nodes)
    names: list[str] = []
    start: dict[str, int] = {}
    for spec in prep.inputs:
        names.append(spec.name)
        start[spec.name] = 0
    for n in prep.nodes:
        for o in n.outputs:
            if o and o not in prep.static and o not in start:
                names.append(o)
                start[o] = n.index
    end = dict(start)
    for n in prep.nodes:
        for i in n.inputs:
            if i in end:
                end[i] = max(end[i], n.index)
    for o in prep.outputs:
        if o in end:
            end[o] = n_nodes - 1
    return names, np.array([start[t] for t in names]), np.array([end[t] for t in names])


def _node_traffic(node: NodeRec, ins: list, outs: list, st: PassState) -> tuple[float, float]:
    """(activation bytes, weight bytes) a node reads and writes: its memory traffic for a roofline
    time estimate. Weights (static inputs) are apart because they do not grow with the batch, which
    a fixed-batch ("scaled") graph could not tell. Shape-only ops move nothing on the device."""
    if node.op in ops.HOST_OPS:
        return 0.0, 0.0
    act = weights = 0.0
    for name, shape in zip(node.inputs, ins):
        if name and shape is not None:
            size = math.prod(shape) * itemsize(st.dtypes.get(name, 1))
            if name in st.prep.static:
                weights += size
            else:
                act += size
    for name, shape in zip(node.outputs, outs):
        if name and shape is not None:
            act += math.prod(shape) * itemsize(st.dtypes.get(name, 1))
    return float(act), float(weights)


def _launches_kernel(node: NodeRec, st: PassState) -> bool:
    """Whether an eager framework would launch a device kernel for this node: it computes a
    floating-point tensor that is not a view and not shape arithmetic folded on the host."""
    if node.op in ops.HOST_OPS or node.op in ops.VIEW_OPS:
        return False
    out = node.outputs[0] if node.outputs else ""
    if not out or out in st.prep.static:
        return False
    return st.dtypes.get(out, 0) in FLOAT_TYPES


def _scaled_batch(prep: Prepared) -> int:
    """Exported batch of a fixed-shape graph: axis 0 of the highest-rank input (old exporters
    also list biases as rank-1 inputs, which must not be mistaken for the data)."""
    best = max(prep.inputs, key=lambda spec: len(spec.dims), default=None)
    if best is None or not best.dims or not isinstance(best.dims[0], int) or best.dims[0] < 1:
        return 1
    return best.dims[0]


def analyze(
    model: ModelSource,
    *,
    fixed_dims: Mapping[str, int] | None = None,
    default_seq: int | None = None,
    strict: bool = False,
    name: str | None = None,
) -> GraphAnalysis:
    """Analyse an ONNX model (path, bytes or ModelProto).

    Input dims named by a ``dim_param`` on axis 0 are the batch ``b``; named dims on other axes are
    the sequence ``s`` (pin any of them with ``fixed_dims``).  Graphs with only fixed dims are
    analysed once and scaled linearly by ``batch / exported batch`` ("scaled" mode).  Unknown ops
    are counted in ``unknown_ops`` (0 FLOPs); with ``strict=True`` they raise :class:`GraphError`."""
    t0 = time.perf_counter()
    proto, label = load_model(model)
    prep = prepare(proto, label)
    fixed = dict(fixed_dims or {})
    roles = symbol_roles(prep, fixed)
    has_b = "b" in roles.values()
    has_s = "s" in roles.values()
    if has_b:
        mode = "symbolic"
        monos = MONOS_BS if has_s else MONOS_B
        points = [(b, s) for b in B_POINTS for s in (S_POINTS if has_s else (0,))]
    else:
        mode = "scaled"
        b0 = _scaled_batch(prep)
        monos = ((1, 0), (1, 1), (1, 2)) if has_s else ((1, 0),)
        points = [(b0, s) for s in (S_POINTS if has_s else (0,))]

    unknown: Counter[str] = Counter()
    for n in prep.nodes:
        if n.domain not in ("", "ai.onnx") or ops.category(n.op) is None:
            unknown[n.op if n.domain in ("", "ai.onnx") else f"{n.domain}:{n.op}"] += 1
    if strict and unknown:
        first = next(n for n in prep.nodes if n.domain not in ("", "ai.onnx") or ops.category(n.op) is None)
        raise GraphError(f"{label}: unsupported op(s) {dict(unknown)}; first at {first.where()}")

    tensors, t_start, t_end = _tensors(prep)
    softmaxes = attention_softmaxes(prep)
    in_names = [s.name for s in prep.inputs]
    out_set = set(prep.outputs)
    n_nodes = len(prep.nodes)
    rows = []
    weight_bytes = np.zeros(n_nodes)  # read once per step whatever the batch: kept out of the fit
    for b, s in points:
        dims = {sym: (b if role == "b" else s) for sym, role in roles.items()}
        dims.update(fixed)
        flops_row = np.zeros(n_nodes)
        bytes_row = np.zeros(n_nodes)

        def visit(node: NodeRec, ins: list, outs: list, st: PassState, _row: np.ndarray = flops_row,
                  _bytes: np.ndarray = bytes_row) -> None:
            _row[node.index] = node_flops(node, ins, outs)
            _bytes[node.index], weight_bytes[node.index] = _node_traffic(node, ins, outs, st)

        try:
            st = run_pass(prep, dims, visit)
        except GraphError:
            raise
        except (ValueError, IndexError, KeyError, TypeError, ZeroDivisionError) as exc:
            raise GraphError(f"{label}: analysis failed ({type(exc).__name__}: {exc})") from exc
        sizes = np.array([math.prod(st.shapes[t]) * itemsize(st.dtypes[t]) for t in tensors], dtype=np.float64)
        in_elems = float(sum(math.prod(st.shapes[t]) for t in in_names))
        # a fused attention kernel's log-sum-exp: one fp32 per row of each attention matrix
        lse = float(sum(math.prod(st.shapes[t][:-1]) * 4 for t in softmaxes if st.shapes.get(t)))
        rows.append(np.concatenate([flops_row, sizes, [in_elems], bytes_row, [lse]]))
    coef = fit(monos, points, np.stack(rows))  # (M, K)
    kernels = np.array([_launches_kernel(n, st) for n in prep.nodes], dtype=bool)  # batch-independent
    node_coef = coef[:, :n_nodes].T.copy()
    size_coef = coef[:, n_nodes:n_nodes + len(tensors)].T
    node_bytes_coef = coef[:, n_nodes + len(tensors) + 1:-1].T.copy()
    lse_coef = coef[:, -1].copy()
    in_elems_coef = coef[:, n_nodes + len(tensors)].copy()

    flops_coef = {c: np.zeros(len(monos)) for c in ops.CATEGORIES}
    for n in prep.nodes:
        cat = ops.category(n.op) if n.domain in ("", "ai.onnx") else None
        if cat is not None:
            flops_coef[cat] += node_coef[n.index]
    is_input = np.array([t in set(in_names) for t in tensors], dtype=bool)
    is_output = np.array([t in out_set for t in tensors], dtype=bool)
    delta = np.zeros((n_nodes + 1, len(monos)))
    np.add.at(delta, t_start, size_coef)
    np.add.at(delta, t_end + 1, -size_coef)
    live = np.cumsum(delta, axis=0)[:n_nodes]
    params, param_bytes = _params(prep)
    const_params, const_bytes = _const_params(prep, st)
    index = {t: i for i, t in enumerate(tensors)}
    w32, wamp, a32, aamp, c32, camp = (np.zeros(len(tensors)) for _ in range(6))
    for (t, kind), (f32, famp) in saved_tensors(prep, st.dtypes).items():
        if t in index:
            w32[index[t]] += f32
            wamp[index[t]] += famp
            if kind.startswith("attn"):
                a32[index[t]] += f32
                aamp[index[t]] += famp
            elif kind == "conv":
                c32[index[t]] += f32
                camp[index[t]] += famp
    # the largest tensor at the biggest evaluation point (batch-monotone for any sane graph)
    big = int(np.argmax(size_coef @ monomial_vector(monos, max(B_POINTS), max(S_POINTS) if has_s else 0))) \
        if len(tensors) else 0
    # the largest graph output: what a loss reads (its softmax and gradients are as large)
    out_idx = np.flatnonzero(is_output)
    loss_out = (int(out_idx[np.argmax(size_coef[out_idx] @ monomial_vector(
        monos, max(B_POINTS), max(S_POINTS) if has_s else 0))]) if len(out_idx) else -1)
    meta = {p.key: p.value for p in proto.metadata_props}
    if default_seq is None and SEQ_META_KEY in meta:
        default_seq = int(meta[SEQ_META_KEY])
    if name is None:
        name = proto.graph.name if label.startswith("<") else label.rsplit("/", 1)[-1].removesuffix(".onnx")
    return GraphAnalysis(
        name=name or "model",
        opset=default_opset(proto),
        mode=mode,
        symbols=roles,
        default_seq=default_seq if has_s else None,
        monomials=monos,
        flops_coef=flops_coef,
        activation_coef=size_coef[~is_input].sum(axis=0),
        input_bytes_coef=size_coef[is_input].sum(axis=0),
        input_elems_coef=in_elems_coef,
        output_bytes_coef=size_coef[is_output].sum(axis=0),
        live_coef=live,
        params=int(params + const_params),
        param_bytes=int(param_bytes + const_bytes),
        op_counts=dict(Counter(n.op for n in prep.nodes)),
        unknown_ops=dict(unknown),
        layer_counts=_layer_counts(prep),
        node_names=[n.name for n in prep.nodes],
        node_ops=[n.op for n in prep.nodes],
        node_flops_coef=node_coef,
        node_bytes_coef=node_bytes_coef,
        node_kernels=kernels,
        node_weight_bytes=weight_bytes,
        elapsed_s=time.perf_counter() - t0,
        inputs={s.name: s.dims for s in prep.inputs},
        saved_coef=w32 @ size_coef if len(tensors) else np.zeros(len(monos)),
        saved_amp_coef=wamp @ size_coef if len(tensors) else np.zeros(len(monos)),
        saved_attn_coef=a32 @ size_coef if len(tensors) else np.zeros(len(monos)),
        saved_attn_amp_coef=aamp @ size_coef if len(tensors) else np.zeros(len(monos)),
        saved_conv_coef=c32 @ size_coef if len(tensors) else np.zeros(len(monos)),
        saved_conv_amp_coef=camp @ size_coef if len(tensors) else np.zeros(len(monos)),
        max_tensor_coef=size_coef[big].copy() if len(tensors) else np.zeros(len(monos)),
        attn_rows_coef=lse_coef,
        attn_layers=len(softmaxes),
        loss_output_coef=size_coef[loss_out].copy() if loss_out >= 0 else np.zeros(len(monos)),
        const_params=int(const_params),
    )
