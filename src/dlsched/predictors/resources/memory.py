"""Peak training-memory estimators (MiB): the Horus Eq. 2 baseline and fitted models that
lean towards over-prediction, because an under-estimate means an OOM-killed job while an
over-estimate only wastes some memory.

Column conventions (all in MiB, per the estimator):
- graph estimators (``HorusEq2Estimator``, ``LinearMemoryEstimator``) take
  ``GRAPH_COLUMNS = (param_mib, act_mib_per_sample, batch)``: parameter bytes and the bytes of
  all intermediate activations of one sample, as a graph analysis gives them;
- ``FakeTensorMemoryEstimator`` takes ``FAKETENSOR_COLUMNS``, the PyTorch FakeTensor estimates
  recorded in the GPUMemNet TIMM table plus the batch size.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dlsched.predictors.resources.regressors import LGBMRegressor, Regressor, _as_2d
from dlsched.predictors.resources.train_memory import TrainingMemoryModel

MIB = 2.0**20
GRAPH_COLUMNS = ("param_mib", "act_mib_per_sample", "batch")
FAKETENSOR_COLUMNS = ("fake_last_mib", "fake_fwd_mib", "fake_bwd_mib", "batch")
PRIOR_CONTEXT_MIB = 2048.0


def horus_eq2_mib(params: float, activations: float, batch: float, grads: float | None = None,
                  bytes_per_value: int = 4, delta_mib: float = 0.0) -> float:
    """Horus Eq. 2, GMem = (B*A + P) + B*G + delta, with counts turned into MiB.

    ``params`` (P) and ``activations`` (A, per sample) are element counts; ``grads`` (G)
    defaults to P, one gradient per parameter, as in the GPUMemNet re-implementation the
    EVALUATION baseline uses. Values are ``bytes_per_value`` wide (4 = fp32).
    """
    g = params if grads is None else grads
    return bytes_per_value * ((batch * activations + params) + batch * g) / MIB + delta_mib


class HorusEq2Estimator(Regressor):
    """Eq. 2 as a (parameter-free) estimator over ``GRAPH_COLUMNS``; ``fit`` learns nothing."""

    kind = "horus_eq2"

    def __init__(self, delta_mib: float = 0.0, seed: int = 0) -> None:
        self.delta_mib = delta_mib
        self.seed = seed

    def fit(self, X: Any, y: Any = None) -> HorusEq2Estimator:
        _as_2d(X)
        self.fitted_ = True
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        X = _as_2d(X)
        p, a, b = X[:, 0], X[:, 1], X[:, 2]
        # In MiB directly: B*A + P + B*G with G = P (all fp32, as Eq. 2 assumes).
        return b * a + p + b * p + self.delta_mib

    def _state(self) -> dict[str, Any]:
        return {"fitted_": True}

    def _load_payload(self, payload: str) -> None:
        self.fitted_ = bool(json.loads(payload)["fitted_"])


class LinearMemoryEstimator(Regressor):
    """mem = delta + alpha*param_mib + beta*batch*act_mib_per_sample, fitted by *quantile*
    regression (pinball loss at ``quantile``) with non-negative coefficients, then scaled by
    ``safety``. The shape is the physics of training (a CUDA context, weights + gradients +
    optimiser state proportional to parameters, saved activations proportional to batch), so it
    extrapolates to unseen architectures far better than trees on a few hundred points."""

    kind = "linear_memory"

    def __init__(self, quantile: float = 0.9, safety: float = 1.0, seed: int = 0) -> None:
        self.quantile = quantile
        self.safety = safety
        self.seed = seed

    @staticmethod
    def _design(X: np.ndarray) -> np.ndarray:
        return np.c_[np.ones(len(X)), X[:, 0], X[:, 1] * X[:, 2]]

    def fit(self, X: Any, y: Any) -> LinearMemoryEstimator:
        from scipy.optimize import linprog

        D = self._design(_as_2d(X))
        y = np.asarray(y, float)
        n, k = D.shape
        q = self.quantile
        # min q*sum(u) + (1-q)*sum(v)  s.t.  D w + u - v = y,  w, u, v >= 0
        c = np.r_[np.zeros(k), np.full(n, q), np.full(n, 1 - q)]
        A_eq = np.c_[D, np.eye(n), -np.eye(n)] if n <= 1500 else None
        if A_eq is None:  # large tables: sparse constraint matrix keeps the LP small
            from scipy.sparse import csr_matrix, hstack, identity

            A_eq = hstack([csr_matrix(D), identity(n), -identity(n)]).tocsr()
        res = linprog(c, A_eq=A_eq, b_eq=y, bounds=[(0, None)] * (k + 2 * n), method="highs")
        if not res.success:
            raise RuntimeError(f"quantile fit failed: {res.message}")
        w = res.x[:k]
        self.intercept_ = float(w[0])
        self.coef_ = np.asarray(w[1:], float)
        return self

    @classmethod
    def prior(cls) -> LinearMemoryEstimator:
        """First-principles coefficients, fitted to no data (so free of any data license):
        a 2 GiB CUDA context with cuDNN/cuBLAS handles and workspaces (rounded up: OOM-averse),
        4x the parameter bytes (fp32 weights, gradients and two Adam moments) and 1x the
        activation bytes of the batch (each intermediate tensor kept once for the backward
        pass; activation gradients are transient)."""
        est = cls(quantile=0.9, safety=1.0)
        est.intercept_ = PRIOR_CONTEXT_MIB
        est.coef_ = np.array([4.0, 1.0])
        return est

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        D = self._design(_as_2d(X))
        return self.safety * (D[:, 1:] @ self.coef_ + self.intercept_)

    def _state(self) -> dict[str, Any]:
        return {"intercept_": self.intercept_, "coef_": self.coef_.tolist()}

    def _load_payload(self, payload: str) -> None:
        s = json.loads(payload)
        self.intercept_ = float(s["intercept_"])
        self.coef_ = np.asarray(s["coef_"], float)


class FakeTensorBaseline(Regressor):
    """PyTorch FakeTensor's own estimate (the last numeric value it reports), unchanged."""

    kind = "faketensor"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, X: Any, y: Any = None) -> FakeTensorBaseline:
        _as_2d(X)
        self.fitted_ = True
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return _as_2d(X)[:, 0].copy()

    def _state(self) -> dict[str, Any]:
        return {"fitted_": True}

    def _load_payload(self, payload: str) -> None:
        self.fitted_ = bool(json.loads(payload)["fitted_"])


class FakeTensorMemoryEstimator(LGBMRegressor):
    """Corrects FakeTensor estimates (which miss the CUDA context, allocator caching and
    workspaces) with LightGBM *quantile* regression on log memory: an upper quantile
    (``alpha`` = 0.8 by default) keeps under-predictions rare. Input: ``FAKETENSOR_COLUMNS``."""

    kind = "faketensor_lgbm"

    def __init__(self, n_estimators: int = 300, num_leaves: int = 15, learning_rate: float = 0.05,
                 min_child_samples: int = 20, subsample: float = 1.0, colsample_bytree: float = 1.0,
                 objective: str = "quantile", alpha: float = 0.8, seed: int = 0) -> None:
        super().__init__(n_estimators=n_estimators, num_leaves=num_leaves, learning_rate=learning_rate,
                         min_child_samples=min_child_samples, subsample=subsample,
                         colsample_bytree=colsample_bytree, objective=objective, alpha=alpha, seed=seed)

    @staticmethod
    def _features(X: np.ndarray) -> np.ndarray:
        last, fwd, bwd, batch = X[:, 0], X[:, 1], X[:, 2], X[:, 3]
        return np.c_[np.log1p(np.clip(last, 0, None)), np.log1p(np.clip(fwd, 0, None)),
                     np.log1p(np.clip(bwd - fwd, 0, None)), np.log(np.clip(batch, 1, None))]

    def fit(self, X: Any, y: Any) -> FakeTensorMemoryEstimator:
        super().fit(self._features(_as_2d(X)), np.log(np.asarray(y, float)))
        return self

    def predict(self, X: Any) -> np.ndarray:
        return np.exp(super().predict(self._features(_as_2d(X))))


MEMORY_REGISTRY: dict[str, type[Regressor]] = {
    c.kind: c for c in (HorusEq2Estimator, LinearMemoryEstimator, FakeTensorBaseline, FakeTensorMemoryEstimator,
                        TrainingMemoryModel)
}
