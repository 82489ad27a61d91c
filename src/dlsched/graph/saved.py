"""Which activations autograd keeps for the backward pass, per ONNX op type.

Training memory is not the sum of every intermediate tensor: after the forward pass only the
tensors some backward formula needs are still alive (PyTorch's ``derivatives.yaml``).  The rules:

* MatMul/Gemm/Conv/Einsum keep their *activation* inputs (weights are parameters, counted apart);
* Relu/Sigmoid/Tanh/Softmax/Exp/Sqrt/Reciprocal keep their output; Gelu/Erf/Silu/Clip/Log/Pow/
  HardSwish/LeakyRelu/Elu/Softplus/Mish keep their input;
* Mul/Div keep the operands the gradient needs (nothing when the other side is a constant);
  Where (``masked_fill``) keeps only its condition;
* Add/Sub/Concat/Split/Reshape/Transpose/pooling by average/Cast/Pad/Resize keep nothing;
* Dropout keeps a one-byte mask per element; MaxPool its input and int64 indices;
* BatchNorm/LayerNorm/GroupNorm/InstanceNorm keep their input (the per-row statistics are small);
* LSTM/GRU/RNN keep their input and cuDNN's per-step reserve (gates and states, see RNN_RESERVE);
* decomposed GELU (Div-Erf-Add-Mul) and SiLU (Sigmoid-Mul) keep only x, as PyTorch's fused ops do;
* attention probabilities (Softmax between q·kᵀ and ·v) are tagged, because a fused attention
  kernel (``scaled_dot_product_attention``) keeps none of the s×s matrices;
* Gather keeps its indices; any op not listed keeps its activation inputs (the cautious choice).

Views (Reshape, Flatten, (Un)Squeeze, Identity, Transpose) share storage with their input, so a
tensor saved through several views is counted once.  Under AMP (``torch.autocast``) the tensor
ops save half-precision copies, while the ops autocast runs in fp32 (softmax, norms, exp/log/pow,
reductions) keep fp32 tensors: :func:`saved_weights` gives both factors.
"""

from __future__ import annotations

import onnx

from dlsched.graph.prepare import NodeRec, Prepared

KEEP_INPUTS = frozenset(["MatMul", "Gemm", "Conv", "ConvTranspose", "Einsum", "MatMulInteger",
                         "Gelu", "Erf", "Clip", "Log", "Pow", "HardSwish", "HardSigmoid", "LeakyRelu",
                         "Elu", "Selu", "Celu", "Softplus", "Softsign", "Mish", "PRelu", "Abs", "Sin",
                         "Cos", "Neg", "BatchNormalization", "LayerNormalization", "GroupNormalization",
                         "InstanceNormalization", "LpNormalization", "ReduceL2", "ReduceMax", "ReduceMin",
                         "LRN", "Atan", "ThresholdedRelu"])
KEEP_OUTPUT = frozenset(["Relu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Exp", "Sqrt", "Reciprocal"])
KEEP_NOTHING = frozenset([
    "Add", "Sub", "Concat", "Split", "Reshape", "Transpose", "Flatten", "Squeeze", "Unsqueeze",
    "Identity", "Cast", "CastLike", "Pad", "Resize", "Upsample", "Expand", "Tile", "Slice",
    "AveragePool", "GlobalAveragePool", "ReduceMean", "ReduceSum", "Shape", "Size", "Constant",
    "ConstantOfShape", "Range", "Equal", "Less", "Greater", "LessOrEqual", "GreaterOrEqual", "Not",
    "And", "Or", "Floor", "Ceil", "Round", "Sign", "ArgMax", "ArgMin", "NonZero", "ScatterND",
    "ScatterElements", "DepthToSpace", "SpaceToDepth", "Trilu", "CumSum", "OneHot", "Mod", "Min",
    "Max", "Sum", "Mean", "SequenceConstruct", "If", "Loop",
])
#: ops whose saved tensors stay fp32 under autocast (its fp32 list, plus the norms PyTorch runs
#: in fp32 for fp16 inputs); all other saved floats are fp16 copies under AMP.
AMP_FP32 = frozenset(["Softmax", "LogSoftmax", "LayerNormalization", "GroupNormalization",
                      "InstanceNormalization", "Exp", "Log", "Pow", "Sqrt", "Reciprocal", "ReduceL2",
                      "LpNormalization", "Softplus", "Erf"])
#: recurrent ops: the reserve cuDNN keeps per time step, in multiples of the output Y
#: (LSTM: 4 gates + cell state; GRU: 3 gates + hidden; plain RNN: the hidden state)
RNN_RESERVE = {"LSTM": 5.0, "GRU": 4.0, "RNN": 1.0}
#: ops of convolutional networks whose saved tensors the fit may weigh apart (kind "conv"):
#: cuDNN's convolution and batch-norm kernels hold extra per-sample workspace beside them
CONV_SAVERS = frozenset(["Conv", "ConvTranspose", "BatchNormalization"])
VIEWS = frozenset(["Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Transpose"])
FLOATS = frozenset([onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                    onnx.TensorProto.DOUBLE])


def _root(name: str, alias: dict[str, str]) -> str:
    while name in alias:
        name = alias[name]
    return name


def saved_tensors(prep: Prepared, dtypes: dict[str, int]) -> dict[tuple[str, str], tuple[float, float]]:
    """``{(tensor, kind): (fp32 factor, AMP factor)}`` for every storage autograd keeps.

    The factor multiplies the size in bytes of ``tensor`` as exported (fp32): kind ``"t"`` is the
    tensor itself (1.0 in fp32 training; under AMP 0.5 for half-precision copies, 1.0 for
    fp32-kept ones and non-float tensors); ``"mask"`` a Dropout mask (one byte per element of an
    fp32 tensor: 0.25); ``"idx"`` MaxPool's int64 indices (8 bytes per fp32 output element: 2.0);
    ``"rnn"`` a recurrent op's reserve, a multiple of its output; ``"conv"`` a tensor kept by a
    convolution or batch norm (:data:`CONV_SAVERS`); ``"attn"``/``"attn_mask"`` the
    attention probabilities (and their dropout mask and dropped copy), which fused attention
    kernels do not keep.
    Tensors are storage roots (views resolved), so a tensor saved by several ops appears once."""
    alias: dict[str, str] = {}
    for n in prep.nodes:
        if n.op in VIEWS and n.inputs and n.inputs[0] and n.outputs and n.inputs[0] not in prep.static:
            alias[n.outputs[0]] = n.inputs[0]
    saved: dict[tuple[str, str], tuple[float, float]] = {}
    producer, consumers = _links(prep)
    only_x, skip = _fused_activations(prep, producer, consumers)
    attn_probs = _attention_probs(prep, producer, consumers)

    def keep(name: str, node: NodeRec, kind: str = "t") -> None:
        if not name or name in prep.static:
            return
        root = _root(name, alias)
        if dtypes.get(root, onnx.TensorProto.FLOAT) in FLOATS:
            amp = 1.0 if node.op in AMP_FP32 else 0.5
        else:
            amp = 1.0
        if kind == "t" and root in attn_probs:
            kind = "attn"
        if kind == "t" and node.op in CONV_SAVERS:
            kind = "conv"
        other = {"t": "conv", "conv": "t"}.get(kind)
        if other is not None and (root, other) in saved:  # one storage, counted once
            old = saved.pop((root, other))
            kind = "conv"
        else:
            old = saved.get((root, kind), (0.0, 0.0))
        saved[(root, kind)] = (1.0, max(old[1], amp))

    for n in prep.nodes:
        acts = [i for i in n.inputs if i and i not in prep.static]
        if n.op in KEEP_NOTHING or n.domain not in ("", "ai.onnx") and not acts or n.index in skip:
            continue
        if n.index in only_x:  # a decomposed GELU/SiLU: PyTorch's fused op keeps just its input
            keep(only_x[n.index], n)
        elif n.op in KEEP_OUTPUT:
            for o in n.outputs[:1]:
                keep(o, n)
        elif n.op in ("Mul", "Div"):
            if len(acts) == 2:  # d(a*b) needs both; d(a/b) needs b and the output
                if n.op == "Mul":
                    for i in acts:
                        keep(i, n)
                else:
                    keep(n.inputs[1], n)
                    keep(n.outputs[0], n)
        elif n.op == "Dropout":
            in_attn = bool(acts) and _root(acts[0], alias) in attn_probs
            if len(n.outputs) > 1 and n.outputs[1]:  # the bool mask output: one byte per element
                keep(n.outputs[1], n, "attn_mask" if in_attn else "t")
            elif acts:
                root = _root(acts[0], alias)
                saved.setdefault((root, "attn_mask" if in_attn else "mask"), (0.25, 0.25))
        elif n.op == "Where":  # masked_fill / where: the gradient needs only the condition
            if n.inputs and n.inputs[0] not in prep.static:
                keep(n.inputs[0], n)
        elif n.op in ("MaxPool", "GlobalMaxPool"):
            for i in acts[:1]:
                keep(i, n)
            if len(n.outputs) > 1 and n.outputs[1]:
                keep(n.outputs[1], n)
            else:
                saved.setdefault((n.outputs[0], "idx"), (2.0, 2.0))
        elif n.op in RNN_RESERVE:
            for i in acts[:1]:
                keep(i, n)
            if n.outputs and n.outputs[0]:  # cuDNN's reserve: gates and states of every time step
                f = RNN_RESERVE[n.op]
                saved.setdefault((n.outputs[0], "rnn"), (f, f / 2))
        elif n.op == "Gather":
            if n.inputs[0] in prep.static:  # embedding lookup: the indices
                if len(n.inputs) > 1:
                    keep(n.inputs[1], n)
            elif len(n.inputs) > 1:
                keep(n.inputs[1], n)
        else:  # KEEP_INPUTS and anything unknown: the activation inputs
            for i in acts:
                keep(i, n)
    return saved


def _fused_activations(prep: Prepared, producer: dict[str, NodeRec],
                       consumers: dict[str, list[NodeRec]]) -> tuple[dict[int, str], set[int]]:
    """Exporters decompose GELU into Div-Erf-Add-Mul-Mul and SiLU into Sigmoid-Mul; PyTorch runs
    each as one op that keeps only its input x. Returns ``{Mul node index: x}`` (the Mul keeps x
    alone) and the indices of the Erf/Sigmoid nodes whose own keep is then dropped."""
    only_x: dict[int, str] = {}
    skip: set[int] = set()
    for n in prep.nodes:
        if n.op != "Mul" or len(n.inputs) != 2 or any(i in prep.static for i in n.inputs):
            continue
        for a, b in (n.inputs, n.inputs[::-1]):
            pb = producer.get(b)
            if pb is None:
                continue
            if pb.op == "Sigmoid" and pb.inputs[0] == a and len(consumers.get(b, ())) == 1:  # SiLU
                only_x[n.index] = a
                skip.add(pb.index)
                break
            if pb.op == "Add":  # (1 + erf(x / sqrt 2)) * x
                erf = next((producer[i] for i in pb.inputs if i in producer and producer[i].op == "Erf"), None)
                if erf is not None:
                    only_x[n.index] = a
                    skip.add(erf.index)
                    break
    return only_x, skip


_SCORE_OPS = frozenset(["Div", "Mul", "Add", "Sub", "Where", "Cast", "Reshape"])
#: ops between the softmax and the ·v MatMul that pass the probabilities on: GPT-2 and T5 cast
#: the softmax output back to the activation dtype (Cast), then apply dropout
_PROB_OPS = frozenset(["Cast", "Dropout"])


def _attention_probs(prep: Prepared, producer: dict[str, NodeRec],
                     consumers: dict[str, list[NodeRec]]) -> set[str]:
    """Every s×s tensor of an attention pattern that a fused kernel (PyTorch's
    ``scaled_dot_product_attention``: FlashAttention or the memory-efficient kernel) never keeps:
    the Softmax output between two activation-activation MatMuls (scores = q·kᵀ, then
    probabilities · v), and what carries it to the second MatMul (a Cast, the dropped copy of a
    Dropout). Dropout masks of these tensors are tagged where the Dropout node is visited."""
    def act_matmul(node: NodeRec | None) -> bool:
        return (node is not None and node.op == "MatMul"
                and all(i and i not in prep.static for i in node.inputs[:2]))

    probs: set[str] = set()
    for n in prep.nodes:
        if n.op != "Softmax" or not n.outputs:
            continue
        # back through scaling, masking (Where: the scores are not its first input), bias, casts
        frontier, scores = [producer.get(n.inputs[0])], False
        for _ in range(5):
            if any(act_matmul(x) for x in frontier):
                scores = True
                break
            frontier = [producer[i] for x in frontier if x is not None and x.op in _SCORE_OPS
                        for i in x.inputs if i in producer and i not in prep.static]
            if not frontier:
                break
        if not scores:
            continue
        chain, frontier, found = [n.outputs[0]], [n.outputs[0]], False
        for _ in range(4):  # Softmax -> [Cast] -> [Dropout] -> MatMul
            nxt: list[str] = []
            for t in frontier:
                for c in consumers.get(t, []):
                    if act_matmul(c):
                        found = True
                    elif c.op in _PROB_OPS and c.outputs and c.outputs[0]:
                        nxt.append(c.outputs[0])
            chain += nxt
            frontier = nxt
            if not frontier:
                break
        if found:
            probs.update(chain)
    return probs


def _links(prep: Prepared) -> tuple[dict[str, NodeRec], dict[str, list[NodeRec]]]:
    """Each tensor's producing node, and the nodes that consume it (in graph order)."""
    producer = {o: n for n in prep.nodes for o in n.outputs if o}
    consumers: dict[str, list[NodeRec]] = {}
    for n in prep.nodes:
        for i in n.inputs:
            if i:
                consumers.setdefault(i, []).append(n)
    return producer, consumers


def attention_softmaxes(prep: Prepared) -> list[str]:
    """Outputs of the attention Softmax nodes (one per attention call): a fused kernel keeps one
    fp32 statistic (the log-sum-exp) per row of each of them instead of the s×s matrix."""
    producer, consumers = _links(prep)
    probs = _attention_probs(prep, producer, consumers)
    return [n.outputs[0] for n in prep.nodes if n.op == "Softmax" and n.outputs and n.outputs[0] in probs]


__all__ = ["AMP_FP32", "KEEP_INPUTS", "KEEP_NOTHING", "KEEP_OUTPUT", "attention_softmaxes", "saved_tensors"]
