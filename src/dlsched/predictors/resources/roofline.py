"""A roofline-and-launch-overhead model of GPU utilisation with a handful of physical constants.

Why: with a dozen profiled architectures, a tree over 18 graph features memorises models
instead of learning what makes a GPU busy. nvidia-smi utilisation is the share of wall time in
which some kernel runs. In an eager training loop the host issues kernels one by one, so

    t_gpu = 3 * (n_kernels * t_floor + F_tensor / (P * s_amp^amp) + F_vector / P
                 + bytes * b_amp^amp / BW) + 12 * param_bytes / BW
    t_cpu = 3 * n_kernels * c_launch + t_step
    util  = 100 * t_gpu / (t_gpu^q + t_cpu^q)^(1/q)

The factor 3 is forward plus backward (two kernels of the same size per forward kernel).
``12 * param_bytes`` is the optimiser reading and writing weights, gradients and one state
tensor. ``t_step`` is the fixed host work of one step (data hand-off, the Python loop). The
soft maximum with exponent ``q`` lets GPU and host time overlap: a big model is GPU-bound
(util near 100 %), a tiny one waits for the host (util ~ t_floor / c_launch).

The eight constants (``P`` FLOP/s, ``s_amp`` tensor-core speed-up under mixed precision,
``BW`` bytes/s, ``b_amp`` traffic factor under mixed precision, ``t_floor`` s per kernel,
``c_launch`` s per launch, ``t_step`` s, ``q``) are fitted in log space with a robust loss.
They stay physically bounded, which is what lets the model extrapolate to an architecture it
has never seen. They can also be set from a data sheet with :meth:`from_constants`, with no
training data at all.

What it cannot see: a data loader or an environment simulator that is slower than the model
(for example PointNet on ShapeNet in Lucid's profiles). Nothing in a computation graph shows it.
"""

from __future__ import annotations

import json
from typing import Any, ClassVar

import numpy as np

from dlsched.predictors.ml.base import Regressor, _as_2d

#: the graph features the model reads, in column order (log1p-transformed like all features)
ROOFLINE_FEATURES: tuple[str, ...] = ("n_kernels", "flops_tensor", "flops", "bytes_accessed", "param_bytes", "amp")
#: the constants, their starting values (a V100-class GPU in PyTorch eager mode) and bounds
CONSTANTS: tuple[str, ...] = ("flops_per_s", "amp_tensor_speedup", "bytes_per_s", "amp_traffic_factor",
                              "kernel_floor_s", "launch_s", "step_s", "overlap_q")
START = (10e12, 3.0, 600e9, 0.6, 5e-6, 20e-6, 5e-3, 4.0)
LOWER = (1e12, 1.0, 100e9, 0.3, 1e-6, 2e-6, 1e-5, 1.0)
UPPER = (200e12, 10.0, 5000e9, 1.0, 50e-6, 200e-6, 1.0, 20.0)
#: forward + backward kernels per forward kernel, and optimiser passes over the parameter bytes
TRAIN_FACTOR = 3.0
OPTIMIZER_PASSES = 12.0


def step_times(theta: np.ndarray, raw: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(t_gpu, t_cpu) in seconds per training step for raw (not log) feature rows."""
    flops_s, s_amp, bw, b_amp, floor, launch, step, _q = np.exp(theta)
    n_k, f_tensor, f_all, nbytes, pbytes, amp = raw.T
    amp = amp > 0.5
    f_vector = np.maximum(f_all - f_tensor, 0.0)
    t_kernels = (n_k * floor + f_tensor / (flops_s * np.where(amp, s_amp, 1.0)) + f_vector / flops_s
                 + nbytes * np.where(amp, b_amp, 1.0) / bw)
    t_gpu = TRAIN_FACTOR * t_kernels + OPTIMIZER_PASSES * pbytes / bw
    t_cpu = TRAIN_FACTOR * n_k * launch + step
    return t_gpu, t_cpu


def step_seconds(theta: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Predicted wall time of one training step in seconds, ``(t_gpu^q + t_cpu^q)^(1/q)``: the
    denominator of :func:`utilisation`, which a measured throughput (steps/s) can be checked
    against without any utilisation measurement."""
    t_gpu, t_cpu = step_times(theta, raw)
    q = float(np.exp(theta[-1]))
    scale = np.maximum(np.maximum(t_gpu, t_cpu), 1e-30)
    return scale * ((t_gpu / scale) ** q + (t_cpu / scale) ** q) ** (1.0 / q)


def utilisation(theta: np.ndarray, raw: np.ndarray) -> np.ndarray:
    """Predicted GPU utilisation in % for raw feature rows."""
    t_gpu, t_cpu = step_times(theta, raw)
    q = float(np.exp(theta[-1]))
    # scale before the power so q up to 20 cannot overflow on second-sized steps
    scale = np.maximum(np.maximum(t_gpu, t_cpu), 1e-30)
    busy = t_gpu / scale
    return 100.0 * busy / (busy**q + (t_cpu / scale) ** q) ** (1.0 / q)


class RooflineRegressor(Regressor):
    """Fits the eight constants to log1p(utilisation); ``X`` holds log1p of
    :data:`ROOFLINE_FEATURES` (as ``features.vectorize`` makes it), ``y`` is log1p(util %)."""

    kind: ClassVar[str] = "roofline"

    def __init__(self, f_scale: float = 0.15, seed: int = 0, fixed: dict[str, float] | None = None) -> None:
        self.f_scale = f_scale  # residual (log units) beyond which the loss turns linear
        self.seed = seed        # unused: the fit is deterministic; kept for the common contract
        # constants held at the given values (e.g. a GPU's data-sheet peaks); the rest are fitted
        self.fixed = fixed

    @staticmethod
    def _raw(X: Any) -> np.ndarray:
        arr = _as_2d(X)
        if arr.shape[1] != len(ROOFLINE_FEATURES):
            raise ValueError(f"roofline model needs {len(ROOFLINE_FEATURES)} columns "
                             f"({', '.join(ROOFLINE_FEATURES)}), got {arr.shape[1]}")
        return np.expm1(arr)

    def fit(self, X: Any, y: Any) -> RooflineRegressor:
        from scipy.optimize import least_squares

        raw = self._raw(X)
        z = np.asarray(y, float)
        if len(z) != len(raw):
            raise ValueError(f"X has {len(raw)} rows but y has {len(z)}")

        fixed = dict(self.fixed or {})
        unknown = set(fixed) - set(CONSTANTS)
        if unknown:
            raise ValueError(f"unknown roofline constant(s) {sorted(unknown)}; known: {', '.join(CONSTANTS)}")
        theta0 = np.log([float(fixed.get(k, v)) for k, v in zip(CONSTANTS, START)])
        free = [i for i, k in enumerate(CONSTANTS) if k not in fixed]
        if not free:
            self.theta_ = theta0
            return self

        def residuals(t: np.ndarray) -> np.ndarray:
            theta = theta0.copy()
            theta[free] = t
            return np.log1p(utilisation(theta, raw)) - z

        res = least_squares(residuals, theta0[free], bounds=(np.log(LOWER)[free], np.log(UPPER)[free]),
                            loss="soft_l1", f_scale=self.f_scale)
        self.theta_ = theta0.copy()
        self.theta_[free] = res.x
        return self

    @classmethod
    def from_constants(cls, **constants: float) -> RooflineRegressor:
        """A model with given constants (names in :data:`CONSTANTS`; the rest keep START),
        for example from a GPU data sheet, without any training data."""
        unknown = set(constants) - set(CONSTANTS)
        if unknown:
            raise ValueError(f"unknown roofline constant(s) {sorted(unknown)}; known: {', '.join(CONSTANTS)}")
        obj = cls()
        obj.theta_ = np.log([float(constants.get(k, v)) for k, v in zip(CONSTANTS, START)])
        return obj

    def constants(self) -> dict[str, float]:
        """The fitted constants by name, for reports and the manifest."""
        self._check_fitted()
        return dict(zip(CONSTANTS, np.exp(self.theta_).tolist()))

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return np.log1p(utilisation(self.theta_, self._raw(X)))

    def _state(self) -> dict[str, Any]:
        return {"theta_": self.theta_.tolist(), "constants": self.constants()}

    def _load_payload(self, payload: str) -> None:
        theta = np.asarray(json.loads(payload)["theta_"], float)
        if theta.shape != (len(CONSTANTS),):
            raise ValueError(f"roofline payload has {theta.size} constants, expected {len(CONSTANTS)}")
        self.theta_ = theta
