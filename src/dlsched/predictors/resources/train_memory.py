"""Peak training memory from what a training step really holds (MiB).

    peak = context + s_state · state + safety · (s_act · saved + s_conv · saved_conv)
           + max(loss, safety · s_tmp · largest_tensor),     and never below the physical floor

* ``state``: exact byte counts, never scaled below 1 (``s_state`` >= 1): fp32 weights +
  gradients + optimizer state, P × (2 + k), k = 0 (SGD), 1 (SGD with momentum), 2 (Adam/AdamW),
  plus P/2 under AMP for the fp16 weight copies autocast keeps, one full P-sized temporary for
  foreach Adam's step (:func:`optimizer_temp_mib`) and one more gradient copy for DDP's buckets.
* ``saved``: the activations autograd keeps for backward (:mod:`dlsched.graph.saved`), fp32 or AMP;
  with a fused attention kernel (the default) the s×s attention tensors are replaced by one fp32
  statistic per row (:data:`ATTENTION_MODES`); ``saved_conv`` is the part kept by convolutions
  and batch norms, weighed apart because cuDNN holds per-sample workspace beside them.
* ``loss``: the loss transient of the output layer, exact: the logits (the largest graph output),
  their log-softmax, its gradient and the logits' gradient, all alive when backward starts
  (:data:`LOSS_COPIES`); vocabulary-sized for a language-model head, negligible for a classifier.
* ``largest_tensor``: the transient of one backward step (an input gradient beside its output);
  it and the loss transient do not overlap in time, hence the max.
* ``context``: the stack's CUDA context, cuBLAS workspaces, allocator floor and library modules
  (:mod:`.context`); the fitted intercept is the context of the fit's own stack, and a prediction
  for another stack replaces it.

Only the estimated parts carry fitted factors: ``s_act``, ``s_conv``, ``s_tmp`` and the lift
``safety`` (allocator rounding, cuDNN workspaces, what the saved-tensor rules miss). The floor --
context + state + saved + saved_conv + loss, each at 1 -- bounds the prediction and its band's
``lo`` from below whatever the fit says (:meth:`TrainingMemoryModel.physical_floor`).

The constants are fitted on measured peaks with an asymmetric relative-error (soft-L1) loss: an
under-prediction weighs :data:`UNDER_WEIGHT` times an over-prediction of the same size (an
under-estimate OOM-kills a co-located job; an over-estimate only wastes memory). ``safety`` is
then the smallest lift on the estimated parts that leaves at most ``under_share`` (2 %) of the
rows under-predicted at all (``under_tol`` = 0). Given the rows' families, the lift and the
``band`` (5th/95th percentile of measured / predicted) come from an inner 5-fold split by family,
i.e. from families each inner fit has not seen, because that is what they must hold for.
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
TRAIN_COLUMNS = ("state_mib", "saved_mib", "saved_conv_mib", "max_tensor_mib", "loss_mib")
#: copies of the logits alive when backward starts (logits, log-softmax, its gradient, the
#: logits' gradient); under AMP the logits and their gradient are fp16, the softmax pair fp32
LOSS_COPIES = {False: 4.0, True: 3.0}
#: an under-prediction weighs this many times an over-prediction of the same relative size
UNDER_WEIGHT = 4.0
#: the fit's lift rule: at most this share of rows under-predicted by more than UNDER_TOL
UNDER_SHARE, UNDER_TOL = 0.02, 0.0
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
    counted in full, because the caching allocator keeps the blocks the freed activations
    leave reserved and the temporary lands in new ones (a measured GPT-2-large step matches
    4P + saved + P + context within 1.3 %);
    SGD's foreach path updates in place (momentum buffers, then parameters); the ``fused``
    kernels and the ``for_loop`` path work per tensor (at most the largest parameter, not
    counted). Weight decay in Adam (not AdamW) adds ``grads + wd·params`` (another copy), which
    the job metadata does not say, so it is not counted."""
    if meta.optimizer_impl != "foreach" or meta.optimizer not in ("adam", "adamw"):
        return 0.0
    return param_mib


def memory_terms(features: Mapping[str, float],
                 meta: JobMeta = JobMeta()) -> tuple[float, float, float, float, float]:
    """``TRAIN_COLUMNS`` of one job from its graph features (``GraphAnalysis.features``):
    (state, saved not by convolutions, saved by convolutions/batch norms, largest tensor, loss).

    ``state`` is exact and complete: weights, gradients, optimizer state, the optimizer step's
    full temporaries (:func:`optimizer_temp_mib`) and DDP's gradient buckets
    (``gradient_as_bucket_view=False``, the default: one more P). ``loss`` is
    :data:`LOSS_COPIES` times the largest graph output (0 for graphs analysed before it was
    recorded)."""
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
    state += optimizer_temp_mib(p, meta)
    loss = LOSS_COPIES[meta.amp] * float(features.get("loss_output_bytes", 0.0)) / MIB
    return state, saved - conv, conv, tmp * (0.5 if meta.amp else 1.0), loss


def _cols(X: np.ndarray) -> np.ndarray:
    """``TRAIN_COLUMNS`` with a zero loss column for tables written before it existed."""
    return np.c_[X, np.zeros(len(X))] if X.shape[1] == len(TRAIN_COLUMNS) - 1 else X


def physical_floor(X: Any, context_mib: float) -> np.ndarray:
    """What a job holds for certain (MiB): the context plus every exact term at 1 -- state
    (weights, gradients, optimizer state and step temporaries, DDP buckets), the saved
    activations and the loss transient. No prediction and no band goes below it."""
    X = _cols(_as_2d(X))
    return context_mib + X[:, 0] + X[:, 1] + X[:, 2] + X[:, 4]


def _peak(coef: Any, X: np.ndarray, safety: float | np.ndarray = 1.0, context_mib: float | None = None) -> np.ndarray:
    """The formula of the module docstring with constants ``coef`` (floor not applied)."""
    ctx = float(coef[0]) if context_mib is None else float(context_mib)
    est = coef[2] * X[:, 1] + coef[3] * X[:, 2]
    return ctx + max(1.0, float(coef[1])) * X[:, 0] + safety * est + np.maximum(X[:, 4], safety * coef[4] * X[:, 3])


def smallest_lift(coef_rows: list[tuple[Any, np.ndarray, np.ndarray]], under_share: float = UNDER_SHARE,
                  under_tol: float = UNDER_TOL, top: float = 8.0) -> float:
    """The smallest ``safety`` >= 1 under which at most ``under_share`` of the rows are
    predicted more than ``under_tol`` below their measurement; each entry is (constants, X, y)
    of one (inner) fold. Bisection: the prediction grows with the lift."""
    def share(s: float) -> float:
        under = sum(int(np.sum(_peak(c, X, s) * (1 + under_tol) < y)) for c, X, y in coef_rows)
        return under / max(1, sum(len(y) for _, _, y in coef_rows))

    if share(1.0) <= under_share:
        return 1.0
    lo, hi = 1.0, top
    if share(hi) > under_share:
        return hi
    for _ in range(40):
        mid = 0.5 * (lo + hi)
        lo, hi = (lo, mid) if share(mid) <= under_share else (mid, hi)
    return hi


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

    def __init__(self, under_share: float = UNDER_SHARE, under_tol: float = UNDER_TOL, seed: int = 0) -> None:
        self.under_share = under_share
        self.under_tol = under_tol
        self.seed = seed

    def fit(self, X: Any, y: Any, sample_weight: Any = None, groups: Any = None) -> TrainingMemoryModel:
        """Fit the constants; ``sample_weight`` (e.g. 1 / rows of the row's family) keeps a few
        large families from deciding the intercept and slopes for everyone. With ``groups``
        (families) the safety lift and the band come from each group predicted by a fit without
        it (5 inner folds), i.e. from how the model does on families it has not seen, which is
        what they are for; without, from the fit rows themselves."""
        X = _cols(_as_2d(X))
        y = np.asarray(y, float)
        w = np.ones(len(y)) if sample_weight is None else np.asarray(sample_weight, float)
        coef = self._solve(X, y, w)
        self.coef_ = [float(v) for v in coef]
        if groups is not None and len(set(groups)) >= INNER_FOLDS:
            from dlsched.predictors.ml.folds import stable_fold

            inner = np.array([stable_fold(f"inner:{g}", INNER_FOLDS) for g in groups])
            parts = [(self._solve(X[inner != f], y[inner != f], w[inner != f]), X[inner == f], y[inner == f])
                     for f in np.unique(inner)]
        else:
            parts = [(coef, X, y)]
        self.safety_ = float(smallest_lift(parts, self.under_share, self.under_tol))
        ratio = np.concatenate([yy / _peak(c, XX, self.safety_) for c, XX, yy in parts])
        self.band_ = [float(np.quantile(ratio, 0.05)), float(np.quantile(ratio, 0.95))]
        return self

    @staticmethod
    def _solve(X: np.ndarray, y: np.ndarray, w: np.ndarray) -> np.ndarray:
        """Asymmetric soft-L1 fit on relative errors (an under-prediction weighs
        :data:`UNDER_WEIGHT` times more), non-negative bounds and ``s_state`` >= 1."""
        from scipy.optimize import least_squares

        sw = np.sqrt(w / w.mean())

        def resid(theta: np.ndarray) -> np.ndarray:
            r = _peak(theta, X) / y - 1.0
            return sw * np.where(r < 0, UNDER_WEIGHT * r, r)

        res = least_squares(resid, x0=np.array([1000.0, 1.0, 1.0, 1.0, 1.0]), loss="soft_l1", f_scale=0.1,
                            bounds=([0.0, 1.0, 0.5, 0.5, 0.0], [8192.0, 4.0, 4.0, 4.0, 8.0]))
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
        """Peak MiB, never below :func:`physical_floor`; ``context_mib`` replaces the fitted
        intercept (the fit stack's context) with another stack's (:mod:`.context`). A state
        factor below 1 (a file fitted before the floor) is read as 1."""
        self._check_fitted()
        X = _cols(_as_2d(X))
        ctx = float(self.coef_[0]) if context_mib is None else float(context_mib)
        return np.maximum(_peak(self.coef_, X, self.safety_, ctx), physical_floor(X, ctx))

    def physical_floor(self, X: Any, context_mib: float | None = None) -> np.ndarray:
        """:func:`physical_floor` with this model's context (or ``context_mib``)."""
        return physical_floor(X, float(self.coef_[0]) if context_mib is None else float(context_mib))

    def predict_band(self, X: Any, context_mib: float | None = None,
                     context_range: tuple[float, float] | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(reserve, lo, hi): the prediction and its ~90 % band; with ``context_range`` (the stack
        is unknown) lo and hi also span the smallest and largest known stack context. ``lo`` is
        never below the physical floor of the smallest context considered."""
        m = self.predict(X, context_mib)
        lo_base, hi_base = m, m
        ctx = float(self.coef_[0]) if context_mib is None else float(context_mib)
        floor = physical_floor(X, ctx if context_range is None else min(ctx, context_range[0]))
        if context_range is not None:
            lo_base = np.minimum(m, self.predict(X, context_range[0]))
            hi_base = np.maximum(m, self.predict(X, context_range[1]))
        lo = np.minimum(np.maximum(lo_base * self.band_[0], floor), m)
        # hi: at least the reserve under the largest context considered (a band_hi < 1 only says
        # the reserve is biased high, not that a larger stack could not be the cluster's)
        return m, lo, np.maximum(hi_base * self.band_[1], hi_base)

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
    "LOSS_COPIES",
    "MAX_BATCH",
    "OPTIMIZER_IMPLS",
    "OPTIMIZER_STATES",
    "TRAIN_COLUMNS",
    "UNDER_SHARE",
    "UNDER_TOL",
    "UNDER_WEIGHT",
    "JobMeta",
    "TrainingMemoryModel",
    "calibration_factor",
    "memory_terms",
    "optimizer_temp_mib",
    "physical_floor",
    "smallest_lift",
]
