"""Peak training memory from what a training step really holds (MiB).

    peak = safety · (context + s_state · state + s_act · saved + s_conv · saved_conv + s_tmp · largest_tensor)

* ``state``: weights + gradients + optimizer state, by optimizer and precision:
  fp32 parameter bytes P × (2 + k), k = 0 (SGD), 1 (SGD with momentum), 2 (Adam/AdamW), plus
  P/2 under AMP for the fp16 weight copies autocast keeps for the backward pass.
* ``saved``: the activations autograd keeps for backward (:mod:`dlsched.graph.saved`), fp32 or AMP,
  without the attention probabilities when the job uses a fused attention kernel.
* ``saved_conv``: the part of it kept by convolutions and batch norms, weighed apart because
  cuDNN holds per-sample workspace beside them (``saved`` is the rest).
* ``largest_tensor``: the transient of one backward step (an input gradient beside its output).
* ``context``: the CUDA context, cuDNN/cuBLAS workspaces and what the caching allocator holds back
  (it rounds to 512 B blocks in 2 MiB segments; ``s_act`` > 1 is that rounding and fragmentation).

The five constants are fitted on measured peaks with a relative-error (soft-L1) loss and
non-negative bounds; ``safety`` then lifts the fit so that at most 5 % of the training rows are
under-predicted by more than 10 % -- the share the issue allows, the same rule as
:func:`calibration_factor` (an under-estimate OOM-kills a job; an over-estimate wastes memory). The
measured/predicted ratios have a heavy upper tail (a few families far above the formula), so a
stricter in-sample share costs a lot: on 253 TIMM architectures out of fold, 3 % gives MAPE 22.6 %
with 3.3 % under-predicted, 5 % gives 13.1 % with 4.8 %. ``band`` is the 5th/95th percentile of measured / predicted on the fit rows: on
unseen families (out of fold) that holds ~80 % of the measurements.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from dlsched.predictors.resources.regressors import Regressor, _as_2d

MIB = 2.0**20
#: optimizer -> state tensors per parameter (momentum buffer; Adam's two moments)
OPTIMIZER_STATES = {"sgd": 0, "sgd_momentum": 1, "adam": 2, "adamw": 2}
DEFAULT_OPTIMIZER = "adam"
TRAIN_COLUMNS = ("state_mib", "saved_mib", "saved_conv_mib", "max_tensor_mib")
#: the largest batch worth asking about; beyond it no GPU holds even the inputs
MAX_BATCH = 1 << 20


@dataclass(frozen=True)
class JobMeta:
    """What the graph does not say about a training job. Defaults: Adam (the most common and the
    hungriest of the usual optimizers, so a default over- rather than under-predicts), fp32, and
    eager attention (the s×s probabilities kept; ``fused_attention=True`` for code that calls
    ``scaled_dot_product_attention``, such as timm's ViTs, which keeps none of them)."""

    optimizer: str = DEFAULT_OPTIMIZER
    amp: bool = False
    fused_attention: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZER_STATES:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; known: {', '.join(OPTIMIZER_STATES)}")


def memory_terms(features: Mapping[str, float], meta: JobMeta = JobMeta()) -> tuple[float, float, float, float]:
    """``TRAIN_COLUMNS`` of one job from its graph features (``GraphAnalysis.features``)."""
    sfx = "_amp" if meta.amp else ""
    try:
        conv = float(features.get("saved_conv_bytes" + sfx, 0.0)) / MIB
        p = float(features["param_bytes"]) / MIB
        saved = float(features["saved_bytes_amp" if meta.amp else "saved_bytes"]) / MIB
        if meta.fused_attention:
            saved -= float(features["saved_attn_bytes_amp" if meta.amp else "saved_attn_bytes"]) / MIB
        tmp = float(features["max_tensor_bytes"]) / MIB
    except KeyError as exc:
        raise KeyError(f"training-memory estimate needs feature {exc.args[0]!r} "
                       "(re-run the graph analysis with this dlsched)") from None
    state = p * (2 + OPTIMIZER_STATES[meta.optimizer]) + (0.5 * p if meta.amp else 0.0)
    return state, saved - conv, conv, tmp * (0.5 if meta.amp else 1.0)


def calibration_factor(measured: Any, predicted: Any, under_tol: float = 0.10, under_share: float = 0.05) -> float:
    """One factor on predictions from observed peaks, by the fit's own rule: at most
    ``under_share`` of the observations under-predicted by more than ``under_tol``, and never
    below the median of measured / predicted."""
    ratio = np.asarray(measured, float) / np.asarray(predicted, float)
    return max(float(np.median(ratio)), float(np.quantile(ratio, 1 - under_share)) / (1 + under_tol))


class TrainingMemoryModel(Regressor):
    """The formula above as an estimator over ``TRAIN_COLUMNS`` (MiB); ``fit`` learns the
    constants, :meth:`from_constants` builds one without data."""

    kind = "training_memory"

    def __init__(self, under_share: float = 0.05, under_tol: float = 0.10, seed: int = 0) -> None:
        self.under_share = under_share
        self.under_tol = under_tol
        self.seed = seed

    def fit(self, X: Any, y: Any) -> TrainingMemoryModel:
        from scipy.optimize import least_squares

        X = _as_2d(X)
        y = np.asarray(y, float)
        A = np.c_[np.ones(len(X)), X]

        def resid(theta: np.ndarray) -> np.ndarray:
            return (A @ theta) / y - 1.0

        res = least_squares(resid, x0=np.array([1000.0, 1.0, 1.0, 1.0, 1.0]), loss="soft_l1", f_scale=0.1,
                            bounds=([0.0, 0.5, 0.5, 0.5, 0.0], [8192.0, 4.0, 4.0, 4.0, 8.0]))
        self.coef_ = [float(v) for v in res.x]
        ratio = y / (A @ res.x)
        # lift so that <= under_share of the rows are under-predicted by more than under_tol
        self.safety_ = float(max(1.0, np.quantile(ratio, 1.0 - self.under_share) / (1.0 + self.under_tol)))
        r = ratio / self.safety_
        self.band_ = [float(np.quantile(r, 0.05)), float(np.quantile(r, 0.95))]
        return self

    @classmethod
    def from_constants(cls, context_mib: float, state: float, act: float, conv: float, tmp: float,
                       safety: float = 1.0, band: tuple[float, float] = (0.8, 1.1)) -> TrainingMemoryModel:
        """A model with given constants (tests, or figures fitted elsewhere)."""
        m = cls()
        m.coef_ = [float(context_mib), float(state), float(act), float(conv), float(tmp)]
        m.safety_ = float(safety)
        m.band_ = [float(band[0]), float(band[1])]
        return m

    def constants(self) -> dict[str, float]:
        """The fitted figures by name."""
        self._check_fitted()
        c = self.coef_
        return {"context_mib": c[0], "state_scale": c[1], "act_scale": c[2], "conv_scale": c[3], "tmp_scale": c[4],
                "safety": self.safety_, "band_lo": self.band_[0], "band_hi": self.band_[1]}

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        X = _as_2d(X)
        return self.safety_ * (np.c_[np.ones(len(X)), X] @ np.asarray(self.coef_))

    def predict_band(self, X: Any) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(reserve, lo, hi): the prediction and its ~80 % band."""
        m = self.predict(X)
        return m, np.minimum(m * self.band_[0], m), np.maximum(m * self.band_[1], m)

    def _state(self) -> dict[str, Any]:
        return {"coef": self.coef_, "safety": self.safety_, "band": self.band_}

    def _load_payload(self, payload: str) -> None:
        d = json.loads(payload)
        self.coef_ = [float(v) for v in d["coef"]]
        self.safety_ = float(d["safety"])
        self.band_ = [float(v) for v in d["band"]]


__all__ = [
    "DEFAULT_OPTIMIZER",
    "MAX_BATCH",
    "OPTIMIZER_STATES",
    "TRAIN_COLUMNS",
    "JobMeta",
    "TrainingMemoryModel",
    "calibration_factor",
    "memory_terms",
]
