"""From a graph-feature dict (``dlsched.graph``) to the numeric vectors the models eat.

Every feature goes through log1p: FLOPs, bytes and op counts span many orders of magnitude,
and tree and linear models both extrapolate better in log space. ``amp`` (mixed precision,
0/1) is not a graph property; it is taken from the profile row or the job and defaults to 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

MIB = 2.0**20

#: utilisation model inputs (Horus Table 3 subset that the graph analysis provides)
UTIL_FEATURES: tuple[str, ...] = (
    "batch", "amp", "flops_per_step", "flops_per_sample", "params", "param_bytes",
    "activation_bytes", "activation_bytes_per_sample", "peak_activation_bytes", "n_nodes",
    "n_conv_layers", "n_linear_layers", "n_activations", "n_norm_layers", "n_other_layers",
    "flops_conv", "flops_matmul", "flops_rnn",
)
#: inputs that may be absent and then count as 0
OPTIONAL_FEATURES = frozenset({"amp"})


def vectorize(rows: Sequence[Mapping[str, float]], names: Sequence[str]) -> np.ndarray:
    """Rows of feature dicts -> log1p matrix in ``names`` order; a missing key is an error
    (silently zero-filling FLOPs would give confident nonsense)."""
    X = np.empty((len(rows), len(names)))
    for i, row in enumerate(rows):
        for j, name in enumerate(names):
            if name in row:
                v = float(row[name])
            elif name in OPTIONAL_FEATURES:
                v = 0.0
            else:
                raise KeyError(f"feature {name!r} missing; have {sorted(row)}")
            X[i, j] = np.log1p(max(v, 0.0))
    return X


def mem_inputs(features: Mapping[str, float]) -> tuple[float, float, float]:
    """``(param_mib, act_mib_per_sample, batch)`` for the graph memory estimators.

    Uses ``param_bytes`` and ``activation_bytes`` (bytes of all intermediate tensors for the
    whole batch, as ``GraphAnalysis.features(batch)`` reports them) divided by the batch.
    """
    batch = float(features.get("batch", 1.0)) or 1.0
    try:
        pbytes = float(features["param_bytes"])
        if "activation_bytes_per_sample" in features:
            per_sample = float(features["activation_bytes_per_sample"])
        else:
            per_sample = float(features["activation_bytes"]) / batch
    except KeyError as exc:
        raise KeyError(f"memory estimate needs feature {exc.args[0]!r}; have {sorted(features)}") from None
    return pbytes / MIB, per_sample / MIB, batch
