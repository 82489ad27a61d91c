"""The stable, documented list of feature names returned by ``GraphAnalysis.features``.

Regressors index features by name and rely on the order, so extend only by appending."""

from __future__ import annotations

from dlsched.graph.ops import CATEGORIES, OP_COUNT_FEATURES

BASE_FEATURES: tuple[str, ...] = (
    "batch",                        # the batch size asked for
    "seq",                          # sequence length used (0 when the model has no sequence dim)
    "flops",                        # forward FLOPs for the whole batch
    "flops_per_sample",             # forward FLOPs / batch
    "flops_per_step",               # training step FLOPs = 3 x forward, whole batch
    "params",                       # floating-point parameter elements
    "param_bytes",                  # bytes of all initializers
    "model_size_mb",                # param_bytes / 2**20
    "activation_bytes",             # sum of all intermediate/output tensor bytes (whole batch)
    "activation_bytes_per_sample",  # activation_bytes / batch
    "peak_activation_bytes",        # liveness peak over the topological order (whole batch)
    "input_elements",               # elements of all graph inputs (whole batch)
    "input_bytes",                  # bytes of all graph inputs (whole batch)
    "output_bytes",                 # bytes of all graph outputs (whole batch)
    "n_nodes",                      # nodes in the graph
    "n_conv_layers",                # Conv + ConvTranspose
    "n_linear_layers",              # Gemm + MatMul/Einsum with a weight operand
    "n_activations",                # activation-function ops
    "n_norm_layers",                # BatchNorm/LayerNorm/InstanceNorm/GroupNorm/LRN/...
    "n_other_layers",               # pooling, recurrent, softmax, fused attention, embedding lookups
    "n_unknown_ops",                # nodes whose op we have no FLOP rule for
)
FLOP_FEATURES: tuple[str, ...] = tuple(f"flops_{c}" for c in CATEGORIES)
OP_FEATURES: tuple[str, ...] = tuple(OP_COUNT_FEATURES.values())
#: roofline inputs (appended later, so the order above is unchanged)
ROOFLINE_GRAPH_FEATURES: tuple[str, ...] = (
    "n_kernels",                    # nodes an eager framework runs as a device kernel (no views/shape ops)
    "bytes_accessed",               # forward memory traffic of those kernels: inputs + weights + outputs
    "flops_tensor",                 # forward FLOPs of conv/matmul/recurrent/attention (tensor-core work)
)
#: training-memory inputs (dlsched.graph.saved; appended last)
TRAINING_MEMORY_FEATURES: tuple[str, ...] = (
    "saved_bytes",                  # activations autograd keeps for backward, fp32 training (whole batch)
    "saved_bytes_amp",              # the same under AMP (fp16 copies for tensor ops, fp32 for softmax/norms)
    "max_tensor_bytes",             # the largest single activation tensor (whole batch)
    "saved_attn_bytes",             # the part of saved_bytes that is attention probabilities
    "saved_attn_bytes_amp",         # the same under AMP
    "saved_conv_bytes",             # the part of saved_bytes kept by Conv/ConvTranspose/BatchNorm
    "saved_conv_bytes_amp",         # the same under AMP
    "saved_attn_rows_bytes",        # what a fused attention kernel keeps instead: fp32 log-sum-exp per row
    "attn_layers",                  # attention calls (Softmax between q·kᵀ and ·v) in the graph
    "loss_output_bytes",            # the largest graph output (logits): the loss's softmax and gradients match it
)
FEATURE_NAMES: tuple[str, ...] = (BASE_FEATURES + FLOP_FEATURES + OP_FEATURES + ROOFLINE_GRAPH_FEATURES
                                  + TRAINING_MEMORY_FEATURES)
