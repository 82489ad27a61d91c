"""Forward FLOPs of one node from its concrete input/output shapes.

Conventions (also in docs/graph.md): 1 multiply-accumulate (MAC) = 2 FLOPs; bias adds are
1 FLOP per output element; element-wise ops cost ``ops.ELEMENTWISE_COST`` per output element; data
movement costs 0.  A training step is taken as 3x the forward pass (forward + backward w.r.t.
activations + backward w.r.t. weights), see :data:`TRAIN_STEP_FACTOR`."""

from __future__ import annotations

import math
from collections.abc import Sequence

from dlsched.graph.ops import ELEMENTWISE_COST, NORM_OPS, REDUCE_OPS
from dlsched.graph.prepare import NodeRec

Shape = tuple[int, ...]
#: FLOPs of one training step / FLOPs of the forward pass.
TRAIN_STEP_FACTOR = 3.0
#: Per-element FLOPs of normalisations: stats (mean 1, variance 3) + normalise 2 + affine 2.
NORM_STATS_COST = 8.0
#: BatchNorm at inference uses stored statistics: normalise 2 + affine 2.
BN_COST = 4.0
SOFTMAX_COST = 5.0  # max, subtract, exp, sum, divide


def numel(s: Shape | None) -> int:
    return math.prod(s) if s is not None else 0


def _conv(ins: Sequence[Shape | None], out: Shape, group: int) -> float:
    w = ins[1]
    macs = numel(out) * (w[1] * math.prod(w[2:]))
    bias = numel(out) if len(ins) > 2 and ins[2] is not None else 0
    return 2.0 * macs + bias


def _conv_transpose(ins: Sequence[Shape | None], out: Shape, group: int) -> float:
    x, w = ins[0], ins[1]
    macs = numel(x) * w[1] * math.prod(w[2:])  # every input pixel scatters into Cout/g * k outputs
    bias = numel(out) if len(ins) > 2 and ins[2] is not None else 0
    return 2.0 * macs + bias


def _matmul(ins: Sequence[Shape | None], out: Shape) -> float:
    k = ins[0][-1]
    return 2.0 * numel(out) * k


def _gemm(node: NodeRec, ins: Sequence[Shape | None], out: Shape) -> float:
    a = ins[0]
    k = a[0] if node.attrs.get("transA", 0) else a[1]
    bias = numel(out) if len(ins) > 2 and ins[2] is not None else 0
    return 2.0 * numel(out) * k + bias


def _einsum(node: NodeRec, ins: Sequence[Shape | None], out: Shape) -> float:
    eq = node.attrs["equation"]
    eq = eq.decode() if isinstance(eq, bytes) else eq
    lhs = eq.replace(" ", "").split("->")[0].split(",")
    sizes: dict[str, int] = {}
    ell = 1
    for term, shape in zip(lhs, ins):
        if shape is None:
            continue
        letters = term.replace("...", "")
        n_ell = len(shape) - len(letters)
        if "..." in term:
            pre = term.index("...")
            ell = max(ell, math.prod(shape[pre:pre + n_ell]))
            shape = shape[:pre] + shape[pre + n_ell:]
        for c, d in zip(letters, shape):
            sizes[c] = max(sizes.get(c, 1), d)
    total = math.prod(sizes.values()) * ell
    contracted = numel(out) != total
    return (2.0 if contracted else 1.0) * total


def _rnn(node: NodeRec, ins: Sequence[Shape | None]) -> float:
    x, w = ins[0], ins[1]
    layout = node.attrs.get("layout", 0)
    seq, batch, inp = (x[1], x[0], x[2]) if layout else (x[0], x[1], x[2])
    dirs = w[0]
    has_bias = len(ins) > 3 and ins[3] is not None
    op = node.op
    if op == "LSTM":
        h = w[1] // 4
        per = 2 * 4 * h * (inp + h) + 4 * h + (8 * h if has_bias else 0) + 4 * h + 5 * h
    elif op == "GRU":
        h = w[1] // 3
        per = 2 * 3 * h * (inp + h) + 3 * h + (6 * h if has_bias else 0) + 3 * h + 5 * h
    else:
        h = w[1]
        per = 2 * h * (inp + h) + h + (2 * h if has_bias else 0) + h
    return float(dirs * seq * batch * per)


def _attention(node: NodeRec, ins: Sequence[Shape | None]) -> float:
    q, k, v = ins[0], ins[1], ins[2]
    if len(q) == 4:
        b, hq, sq, d = q
        skv, dv = k[2], v[3]
    else:
        hq = node.attrs.get("q_num_heads", 1)
        kvh = node.attrs.get("kv_num_heads", hq)
        b, sq, d = q[0], q[1], q[2] // hq
        skv, dv = k[1], v[2] // kvh
    scores = b * hq * sq * skv
    return 2.0 * scores * d + 2.0 * scores * dv + (SOFTMAX_COST + 1.0) * scores


def node_flops(node: NodeRec, ins: Sequence[Shape | None], outs: Sequence[Shape]) -> float:
    """Forward FLOPs of ``node``; 0 for data movement and for ops we do not know."""
    op = node.op
    out = outs[0] if outs else ()
    if op == "Conv":
        return _conv(ins, out, node.attrs.get("group", 1))
    if op == "ConvTranspose":
        return _conv_transpose(ins, out, node.attrs.get("group", 1))
    if op == "MatMul":
        return _matmul(ins, out)
    if op == "Gemm":
        return _gemm(node, ins, out)
    if op == "Einsum":
        return _einsum(node, ins, out)
    if op in ("LSTM", "GRU", "RNN"):
        return _rnn(node, ins)
    if op == "Attention":
        return _attention(node, ins)
    if op == "BatchNormalization":
        return (BN_COST + (4.0 if node.attrs.get("training_mode", 0) else 0.0)) * numel(out)
    if op in NORM_OPS:
        if op == "LRN":
            return (node.attrs.get("size", 1) + 3.0) * numel(out)
        return NORM_STATS_COST * numel(ins[0])
    if op in ("MaxPool", "AveragePool", "LpPool"):
        return float(numel(out) * math.prod(node.attrs["kernel_shape"]))
    if op in ("GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"):
        return float(numel(ins[0]))
    if op in ("Softmax", "LogSoftmax", "Hardmax"):
        return SOFTMAX_COST * numel(out)
    if op in REDUCE_OPS:
        extra = numel(out) if op == "ReduceMean" else 0
        return float(numel(ins[0]) + extra)
    cost = ELEMENTWISE_COST.get(op)
    if cost is not None:
        n_in = sum(1 for s in ins if s is not None)
        if op in ("Sum", "Max", "Min", "Mean"):
            return (max(n_in - 1, 1) + (1 if op == "Mean" else 0)) * float(numel(out))
        return cost * numel(out)
    if op in ("Resize", "Upsample"):
        mode = node.attrs.get("mode", b"nearest")
        mode = mode.decode() if isinstance(mode, bytes) else mode
        return 0.0 if mode == "nearest" else 4.0 * numel(out)
    return 0.0
