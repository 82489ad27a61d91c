"""Peak training memory from what a training step really holds (MiB).

    peak = safety · (context + s_state · state + s_act · saved + s_conv · saved_conv + s_tmp · largest_tensor)

* ``state``: weights + gradients + optimizer state, by optimizer and precision:
  fp32 parameter bytes P × (2 + k), k = 0 (SGD), 1 (SGD with momentum), 2 (Adam/AdamW), plus
  P/2 under AMP for the fp16 weight copies autocast keeps for the backward pass.
* ``saved``: the activations autograd keeps for backward (:mod:`dlsched.graph.saved`), fp32 or AMP;
  with a fused attention kernel (the default) the s×s attention tensors are replaced by one fp32
  statistic per row (:data:`ATTENTION_MODES`).
* the optimizer step's parameter-sized temporaries (foreach Adam) and DDP's gradient buckets go
  into ``state`` (:func:`memory_terms`).
* ``saved_conv``: the part of it kept by convolutions and batch norms, weighed apart because
  cuDNN holds per-sample workspace beside them (``saved`` is the rest).
* ``largest_tensor``: the transient of one backward step (an input gradient beside its output).
* ``context``: the stack's CUDA context, cuBLAS workspaces, allocator floor and library modules
  (:mod:`.context`); the fitted intercept is the context of the fit's own stack, and a prediction
  for another stack replaces it.

The five constants are fitted on measured peaks with a relative-error (soft-L1) loss, non-negative
bounds and (for the shipped fit) every family weighted equally; ``safety`` then lifts the fit so
that at most 5 % of the rows are under-predicted by more than 10 % -- the share the issue allows
(an under-estimate OOM-kills a job; an over-estimate wastes memory). Given the rows' families,
the lift and the ``band`` (5th/95th percentile of measured / predicted) come from an inner
5-fold split by family, i.e. from families each inner fit has not seen, because that is what
they must hold for; the measured/predicted ratios have a heavy upper tail (a few architectures
far above the formula), so an in-sample lift under-covers new families.
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
#: inner folds (by family) that set the safety lift and band on unseen families
INNER_FOLDS = 5
#: the largest batch worth asking about; beyond it no GPU holds even the inputs
MAX_BATCH = 1 << 20


#: attention implementations (``--attention``): ``eager`` keeps the s×s probabilities, their
#: dropout mask and the dropped copy (2.25 fp32 matrices per layer with dropout); ``fused``
#: (``scaled_dot_product_attention`` with FlashAttention, PyTorch >= 2.0, transformers >= 4.36,
#: timm >= 0.9) and ``memory_efficient`` (SDPA's memory-efficient kernel, what it picks for fp32
#: inputs or an arbitrary mask) keep none of them, only one fp32 log-sum-exp per row (the
#: memory-efficient kernel pads rows to 32: <= 31 rows per head and layer more, not counted)
#: and the dropout RNG seed.
ATTENTION_MODES = ("eager", "fused", "memory_efficient")
#: what current stacks do for transformer graphs; graphs without attention are unaffected
DEFAULT_ATTENTION = "fused"
#: optimizer implementations: PyTorch 2.x runs Adam(W)/SGD ``foreach`` on CUDA by default;
#: ``fused=True`` gives the fused kernel; ``for_loop`` is the per-parameter path
OPTIMIZER_IMPLS = ("foreach", "fused", "for_loop")
DEFAULT_OPTIMIZER_IMPL = "foreach"


@dataclass(frozen=True)
class JobMeta:
    """What the graph does not say about a training job. Defaults: Adam (the most common and the
    hungriest of the usual optimizers, so a default over- rather than under-predicts), its
    ``foreach`` implementation (PyTorch 2.x's default on CUDA), fp32, fused attention (what
    ``scaled_dot_product_attention`` does in transformers >= 4.36 and timm >= 0.9; pass
    ``attention="eager"`` for code that computes softmax(q·kᵀ)·v itself), one process per GPU
    (``ddp=True`` adds DistributedDataParallel's gradient buckets).
    ``fused_attention`` is the older boolean spelling (True = "fused", False = "eager")."""

    optimizer: str = DEFAULT_OPTIMIZER
    amp: bool = False
    fused_attention: bool | None = None
    attention: str = ""
    optimizer_impl: str = DEFAULT_OPTIMIZER_IMPL
    ddp: bool = False

    def __post_init__(self) -> None:
        if self.optimizer not in OPTIMIZER_STATES:
            raise ValueError(f"unknown optimizer {self.optimizer!r}; known: {', '.join(OPTIMIZER_STATES)}")
        mode = self.attention or ("" if self.fused_attention is None
                                  else "fused" if self.fused_attention else "eager") or DEFAULT_ATTENTION
        mode = mode.replace("-", "_").lower()
        if mode not in ATTENTION_MODES:
            raise ValueError(f"unknown attention mode {self.attention!r}; known: {', '.join(ATTENTION_MODES)}")
        if self.optimizer_impl not in OPTIMIZER_IMPLS:
            raise ValueError(f"unknown optimizer implementation {self.optimizer_impl!r}; "
                             f"known: {', '.join(OPTIMIZER_IMPLS)}")
        object.__setattr__(self, "attention", mode)
        object.__setattr__(self, "fused_attention", mode != "eager")


def optimizer_temp_mib(param_mib: float, meta: JobMeta) -> float:
    """Parameter-sized temporaries of one optimizer step (MiB), from PyTorch's ``torch.optim``
    code: ``foreach`` Adam/AdamW allocates ``exp_avg_sq.sqrt()`` for every parameter at once
    (``torch._foreach_sqrt``: one fp32 copy of the parameters) before ``_foreach_addcdiv_``;
    SGD's foreach path updates in place (momentum buffers, then parameters); the ``fused``
    kernels and the ``for_loop`` path work per tensor (at most the largest parameter, not
    counted). Weight decay in Adam (not AdamW) adds ``grads + wd·params`` (another copy), which
    the job metadata does not say, so it is not counted."""
    if meta.optimizer_impl != "foreach" or meta.optimizer not in ("adam", "adamw"):
        return 0.0
    return param_mib


def memory_terms(features: Mapping[str, float], meta: JobMeta = JobMeta()) -> tuple[float, float, float, float]:
    """``TRAIN_COLUMNS`` of one job from its graph features (``GraphAnalysis.features``).

    The optimizer step runs after backward has freed the saved activations, so its temporaries
    raise the peak only by what they exceed those activations by: the state term carries
    ``max(0, temporaries - saved activations)`` (large models at small batches). DDP keeps a
    gradient copy in its buckets (``gradient_as_bucket_view=False``, the default): one more P."""
    sfx = "_amp" if meta.amp else ""
    try:
        conv = float(features.get("saved_conv_bytes" + sfx, 0.0)) / MIB
        p = float(features["param_bytes"]) / MIB
        saved = float(features["saved_bytes_amp" if meta.amp else "saved_bytes"]) / MIB
        if meta.attention != "eager":
            # graphs analysed before attention was tagged have no such key: nothing to take off
            saved -= float(features.get("saved_attn_bytes_amp" if meta.amp else "saved_attn_bytes", 0.0)) / MIB
            saved += float(features.get("saved_attn_rows_bytes", 0.0)) / MIB
        tmp = float(features["max_tensor_bytes"]) / MIB
    except KeyError as exc:
        raise KeyError(f"training-memory estimate needs feature {exc.args[0]!r} "
                       "(re-run the graph analysis with this dlsched)") from None
    state = p * (2 + OPTIMIZER_STATES[meta.optimizer]) + (0.5 * p if meta.amp else 0.0) + (p if meta.ddp else 0.0)
    state += max(0.0, optimizer_temp_mib(p, meta) - saved)
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

    def fit(self, X: Any, y: Any, sample_weight: Any = None, groups: Any = None) -> TrainingMemoryModel:
        """Fit the constants; ``sample_weight`` (e.g. 1 / rows of the row's family) keeps a few
        large families from deciding the intercept and slopes for everyone. With ``groups``
        (families) the safety lift and the band come from measured / predicted of each group
        predicted by a fit without it (5 inner folds), i.e. from how the model does on families
        it has not seen, which is what they are for; without, from the fit rows themselves."""
        X = _as_2d(X)
        y = np.asarray(y, float)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        coef = self._solve(X, y, w)
        self.coef_ = [float(v) for v in coef]
        if groups is not None and len(set(groups)) >= INNER_FOLDS:
            from dlsched.predictors.ml.folds import stable_fold

            inner = np.array([stable_fold(f"inner:{g}", INNER_FOLDS) for g in groups])
            ratio = np.empty(len(y))
            for f in np.unique(inner):
                te = inner == f
                ratio[te] = y[te] / (np.c_[np.ones(te.sum()), X[te]] @ self._solve(X[~te], y[~te], w[~te]))
        else:
            ratio = y / (np.c_[np.ones(len(X)), X] @ coef)
        # lift so that <= under_share of the rows are under-predicted by more than under_tol
        self.safety_ = float(max(1.0, np.quantile(ratio, 1.0 - self.under_share) / (1.0 + self.under_tol)))
        r = ratio / self.safety_
        self.band_ = [float(np.quantile(r, 0.05)), float(np.quantile(r, 0.95))]
        return self

    @staticmethod
    def _solve(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Soft-L1 fit of the five constants on relative errors, non-negative bounds."""
        from scipy.optimize import least_squares

        A = np.c_[np.ones(len(X)), X]
        sw = np.sqrt(w / w.mean())

        def resid(theta: np.ndarray) -> np.ndarray:
            return sw * ((A @ theta) / y - 1.0)

        res = least_squares(resid, x0=np.array([1000.0, 1.0, 1.0, 1.0, 1.0]), loss="soft_l1", f_scale=0.1,
                            bounds=([0.0, 0.5, 0.5, 0.5, 0.0], [8192.0, 4.0, 4.0, 4.0, 8.0]))
        return res.x

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

    def predict(self, X: Any, context_mib: float | None = None) -> np.ndarray:
        """Peak MiB; ``context_mib`` replaces the fitted intercept (the fit stack's context) with
        another stack's (:mod:`.context`)."""
        self._check_fitted()
        X = _as_2d(X)
        coef = np.asarray(self.coef_, float).copy()
        if context_mib is not None:
            coef[0] = float(context_mib)
        return self.safety_ * (np.c_[np.ones(len(X)), X] @ coef)

    def predict_band(self, X: Any, context_mib: float | None = None,
                     context_range: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(reserve, lo, hi): the prediction and its ~80 % band; with ``context_range`` (the stack
        is unknown) lo and hi also span the smallest and largest known stack context."""
        m = self.predict(X, context_mib)
        lo_base, hi_base = m, m
        if context_range is not None:
            lo_base = np.minimum(m, self.predict(X, context_range[0]))
            hi_base = np.maximum(m, self.predict(X, context_range[1]))
        return m, np.minimum(lo_base * self.band_[0], m), np.maximum(hi_base * self.band_[1], m)

    #: the software stack the intercept was fitted on (:mod:`.context`); "" = not said, and then
    #: the fitted intercept is used as it is unless a caller names a stack
    stack_: str = ""

    def _state(self) -> dict[str, Any]:
        return {"coef": self.coef_, "safety": self.safety_, "band": self.band_, "stack": self.stack_}

    def _load_payload(self, payload: str) -> None:
        d = json.loads(payload)
        self.coef_ = [float(v) for v in d["coef"]]
        self.safety_ = float(d["safety"])
        self.band_ = [float(v) for v in d["band"]]
        self.stack_ = str(d.get("stack", ""))


__all__ = [
    "ATTENTION_MODES",
    "DEFAULT_ATTENTION",
    "DEFAULT_OPTIMIZER",
    "MAX_BATCH",
    "OPTIMIZER_IMPLS",
    "OPTIMIZER_STATES",
    "TRAIN_COLUMNS",
    "JobMeta",
    "TrainingMemoryModel",
    "calibration_factor",
    "memory_terms",
    "optimizer_temp_mib",
]
