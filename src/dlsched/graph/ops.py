"""Op-type tables: which ops we know, their FLOP category, and the op-count feature names.

Everything here is data, so the conventions in docs/graph.md can be checked against it."""

from __future__ import annotations

#: Element-wise ops and their FLOPs per output element (1 unless the op is composite).
ELEMENTWISE_COST: dict[str, float] = {
    # binary / n-ary arithmetic and comparisons
    **dict.fromkeys(
        ["Add", "Sub", "Mul", "Div", "Pow", "Mod", "BitShift", "Equal", "Less", "Greater", "LessOrEqual",
         "GreaterOrEqual", "And", "Or", "Xor", "Where", "PRelu", "Max", "Min", "Sum", "Mean"],
        1.0,
    ),
    # unary maths
    **dict.fromkeys(
        ["Neg", "Abs", "Reciprocal", "Sqrt", "Exp", "Log", "Erf", "Sin", "Cos", "Tan", "Floor", "Ceil",
         "Round", "Sign", "Not", "IsNaN", "IsInf", "Clip", "Relu", "ThresholdedRelu", "Softsign"],
        1.0,
    ),
    "LeakyRelu": 2.0,   # compare + multiply
    "Sigmoid": 4.0,     # neg, exp, add, reciprocal
    "Tanh": 5.0,        # two exps, add, sub, div
    "HardSigmoid": 3.0,  # mul, add, clamp
    "HardSwish": 4.0,   # hard-sigmoid + mul
    "Elu": 3.0,
    "Celu": 3.0,
    "Selu": 4.0,
    "Softplus": 3.0,    # exp, add, log
    "Mish": 9.0,        # softplus + tanh + mul
    "Gelu": 8.0,        # erf form: div, erf, add, mul, mul (+ constants)
}
#: Ops that are activation functions (the "Activations" count of the GPU-utilisation paper).
ACTIVATION_OPS = frozenset(
    ["Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Elu", "Celu", "Selu", "Gelu", "HardSigmoid",
     "HardSwish", "Softplus", "Softsign", "Mish", "ThresholdedRelu", "Erf", "Clip"]
)
NORM_OPS = frozenset(
    ["BatchNormalization", "LayerNormalization", "InstanceNormalization", "GroupNormalization",
     "LpNormalization", "MeanVarianceNormalization", "LRN", "RMSNormalization"]
)
POOL_OPS = frozenset(["MaxPool", "AveragePool", "LpPool", "GlobalAveragePool", "GlobalMaxPool", "GlobalLpPool"])
RNN_OPS = frozenset(["LSTM", "GRU", "RNN"])
CONV_OPS = frozenset(["Conv", "ConvTranspose", "ConvInteger"])
MATMUL_OPS = frozenset(["MatMul", "Gemm", "Einsum", "MatMulInteger"])
SOFTMAX_OPS = frozenset(["Softmax", "LogSoftmax", "Hardmax"])
REDUCE_OPS = frozenset(
    ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
     "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare", "ArgMax", "ArgMin", "TopK", "CumSum"]
)
ATTENTION_OPS = frozenset(["Attention"])
#: Ops that move or describe data but do no arithmetic (0 FLOPs by convention).
DATA_OPS = frozenset(
    ["Reshape", "Transpose", "Concat", "Split", "Slice", "Gather", "GatherElements", "GatherND",
     "ScatterND", "ScatterElements", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Dropout", "Shape",
     "Size", "Constant", "ConstantOfShape", "Cast", "CastLike", "Expand", "Tile", "Pad", "Range",
     "NonZero", "DepthToSpace", "SpaceToDepth", "OneHot", "EyeLike", "Trilu", "Resize", "Upsample",
     "SequenceConstruct", "SplitToSequence", "ConcatFromSequence", "SequenceAt", "ReverseSequence",
     "Compress", "Unique", "Optional", "OptionalGetElement", "OptionalHasElement", "Det", "NonMaxSuppression"]
)
#: Ops that run on the host (shape arithmetic, views, constants): no device kernel, no traffic.
HOST_OPS = frozenset(
    ["Shape", "Size", "Constant", "ConstantOfShape", "Reshape", "Squeeze", "Unsqueeze", "Flatten",
     "Identity", "Range", "Optional", "OptionalGetElement", "OptionalHasElement"]
)
#: Ops that eager frameworks express as views of their input (no kernel in PyTorch).
VIEW_OPS = frozenset(["Transpose", "Expand", "Slice", "Split"])

CATEGORIES: tuple[str, ...] = (
    "conv", "matmul", "rnn", "attention", "norm", "pool", "softmax", "reduce", "elementwise", "other",
)

#: categories whose FLOPs run on matrix units (tensor cores under mixed precision)
TENSOR_CATEGORIES: tuple[str, ...] = ("conv", "matmul", "rnn", "attention")


def category(op: str) -> str | None:
    """FLOP category of a default-domain op, or ``None`` when the op is unknown to us."""
    if op in CONV_OPS:
        return "conv"
    if op in MATMUL_OPS:
        return "matmul"
    if op in RNN_OPS:
        return "rnn"
    if op in ATTENTION_OPS:
        return "attention"
    if op in NORM_OPS:
        return "norm"
    if op in POOL_OPS:
        return "pool"
    if op in SOFTMAX_OPS:
        return "softmax"
    if op in REDUCE_OPS:
        return "reduce"
    if op in ELEMENTWISE_COST:
        return "elementwise"
    if op in DATA_OPS:
        return "other"
    return None


#: op type -> feature name.  The first block is the Horus Table 3 list (in the paper's order),
#: the second block adds ops that matter for transformers and mobile CNNs.  Fixed, so feature
#: vectors line up across models.
OP_COUNT_FEATURES: dict[str, str] = {
    "Exp": "n_exp", "Split": "n_split", "Constant": "n_constant", "GlobalAveragePool": "n_global_avgpool",
    "ReduceMean": "n_reduce_mean", "MaxPool": "n_maxpool", "GRU": "n_gru", "Reshape": "n_reshape",
    "LSTM": "n_lstm", "Concat": "n_concat", "Gather": "n_gather", "Squeeze": "n_squeeze", "Pad": "n_pad",
    "BatchNormalization": "n_bn", "AveragePool": "n_avgpool", "Conv": "n_conv", "Slice": "n_slice",
    "Transpose": "n_transpose", "Flatten": "n_flatten", "Relu": "n_relu", "Gemm": "n_gemm",
    # extras
    "MatMul": "n_matmul", "Add": "n_add", "Mul": "n_mul", "Sub": "n_sub", "Div": "n_div",
    "Softmax": "n_softmax", "LayerNormalization": "n_layernorm", "InstanceNormalization": "n_instancenorm",
    "GroupNormalization": "n_groupnorm", "Sigmoid": "n_sigmoid", "Tanh": "n_tanh", "Erf": "n_erf",
    "Sqrt": "n_sqrt", "Pow": "n_pow", "Unsqueeze": "n_unsqueeze", "ConvTranspose": "n_conv_transpose",
    "LeakyRelu": "n_leaky_relu", "HardSwish": "n_hardswish", "HardSigmoid": "n_hardsigmoid",
    "Clip": "n_clip", "Dropout": "n_dropout", "RNN": "n_rnn", "Einsum": "n_einsum",
    "Attention": "n_attention", "Where": "n_where", "Expand": "n_expand", "Cast": "n_cast",
    "Shape": "n_shape", "Resize": "n_resize", "Identity": "n_identity",
}
