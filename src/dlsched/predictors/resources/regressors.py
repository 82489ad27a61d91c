"""Scikit-learn-style regressors for the utilisation (and memory) predictors.

Conventions (checked by the shared conformance test): hyper-parameters only in ``__init__``;
learned state only in attributes ending ``_``; ``seed`` is a parameter; ``fit`` returns self;
``predict`` returns a float array. Each class also knows how to write itself in a *safe*
format (JSON or the library's own text/JSON model format) and read itself back, so saved
predictors never need pickle. Heavy libraries are imported inside ``fit``/``restore``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from dlsched.predictors.ml.base import Regressor, _as_2d
from dlsched.predictors.resources.roofline import RooflineRegressor


class DummyRegressor(Regressor):
    """Predicts the training mean: the floor every learned model must beat."""

    kind = "dummy"

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed

    def fit(self, X: Any, y: Any) -> DummyRegressor:
        _as_2d(X)
        self.mean_ = float(np.mean(np.asarray(y, float)))
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return np.full(len(_as_2d(X)), self.mean_)

    def _state(self) -> dict[str, Any]:
        return {"mean_": self.mean_}

    def _load_payload(self, payload: str) -> None:
        self.mean_ = float(json.loads(payload)["mean_"])


class LinearRegressor(Regressor):
    """Ridge regression on standardised features, closed form: deterministic and tiny to save.
    ``loss="huber"`` down-weights outlying rows by iteratively re-weighted least squares: with a
    dozen architectures one odd model (a data-loading-bound job) must not tilt the whole line."""

    kind = "linear"

    def __init__(self, alpha: float = 1.0, loss: str = "squared", epsilon: float = 1.35, seed: int = 0) -> None:
        self.alpha = alpha
        self.loss = loss
        self.epsilon = epsilon
        self.seed = seed

    def fit(self, X: Any, y: Any) -> LinearRegressor:
        if self.loss not in ("squared", "huber"):
            raise ValueError(f"loss must be 'squared' or 'huber', not {self.loss!r}")
        X = _as_2d(X)
        y = np.asarray(y, float)
        mu = X.mean(axis=0)
        sd = X.std(axis=0)
        sd[sd == 0] = 1.0
        Z = np.c_[np.ones(len(X)), (X - mu) / sd]
        penalty = self.alpha * np.eye(Z.shape[1])
        penalty[0, 0] = 0.0  # never shrink the intercept
        w = np.ones(len(y))
        for _ in range(50 if self.loss == "huber" else 1):
            beta = np.linalg.solve(Z.T @ (Z * w[:, None]) + penalty, Z.T @ (w * y))
            r = np.abs(y - Z @ beta)
            scale = max(float(np.median(r)) / 0.6745, 1e-9)
            w_new = np.minimum(1.0, self.epsilon * scale / np.maximum(r, 1e-12))
            if np.allclose(w_new, w, atol=1e-9):
                break
            w = w_new
        self.intercept_ = float(beta[0])
        self.coef_ = beta[1:]
        self.x_mean_ = mu
        self.x_scale_ = sd
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return ((_as_2d(X) - self.x_mean_) / self.x_scale_) @ self.coef_ + self.intercept_

    def _state(self) -> dict[str, Any]:
        return {"coef_": self.coef_.tolist(), "intercept_": self.intercept_,
                "x_mean_": self.x_mean_.tolist(), "x_scale_": self.x_scale_.tolist()}

    def _load_payload(self, payload: str) -> None:
        s = json.loads(payload)
        self.coef_ = np.asarray(s["coef_"], float)
        self.intercept_ = float(s["intercept_"])
        self.x_mean_ = np.asarray(s["x_mean_"], float)
        self.x_scale_ = np.asarray(s["x_scale_"], float)


class ForestRegressor(Regressor):
    """Random forest (Horus's best regressor). Trained by scikit-learn, then flattened into
    plain arrays so it is saved as JSON and predicts with all trees walked at once (fast for
    one row, identical before and after a save)."""

    kind = "forest"

    def __init__(self, n_estimators: int = 200, max_depth: int | None = None,
                 min_samples_leaf: int = 1, max_features: float = 1.0, seed: int = 0) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.seed = seed

    def fit(self, X: Any, y: Any) -> ForestRegressor:
        from sklearn.ensemble import RandomForestRegressor

        X = _as_2d(X)
        rf = RandomForestRegressor(
            n_estimators=self.n_estimators, max_depth=self.max_depth,
            min_samples_leaf=self.min_samples_leaf, max_features=self.max_features,
            random_state=self.seed, n_jobs=1,
        ).fit(X, np.asarray(y, float))
        left, right, feat, thr, val, roots = [], [], [], [], [], []
        offset = 0
        for est in rf.estimators_:
            t = est.tree_
            roots.append(offset)
            is_leaf = t.children_left == -1
            left.append(np.where(is_leaf, -1, t.children_left + offset))
            right.append(np.where(is_leaf, -1, t.children_right + offset))
            feat.append(np.where(is_leaf, 0, t.feature))
            thr.append(t.threshold)
            val.append(t.value[:, 0, 0])
            offset += t.node_count
        self.left_ = np.concatenate(left).astype(np.int64)
        self.right_ = np.concatenate(right).astype(np.int64)
        self.feature_ = np.concatenate(feat).astype(np.int64)
        self.threshold_ = np.concatenate(thr).astype(float)
        self.value_ = np.concatenate(val).astype(float)
        self.roots_ = np.asarray(roots, np.int64)
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        # scikit-learn compares float32 features with float64 thresholds; do the same.
        X = _as_2d(X).astype(np.float32).astype(float)
        rows = np.arange(len(X))[None, :]
        node = np.repeat(self.roots_[:, None], len(X), axis=1)
        while True:
            active = self.left_[node] != -1
            if not active.any():
                break
            go_left = X[rows.repeat(len(self.roots_), 0), self.feature_[node]] <= self.threshold_[node]
            nxt = np.where(go_left, self.left_[node], self.right_[node])
            node = np.where(active, nxt, node)
        return self.value_[node].mean(axis=0)

    def _state(self) -> dict[str, Any]:
        return {k: getattr(self, k).tolist() for k in
                ("left_", "right_", "feature_", "threshold_", "value_", "roots_")}

    def _load_payload(self, payload: str) -> None:
        s = json.loads(payload)
        for k in ("left_", "right_", "feature_", "roots_"):
            setattr(self, k, np.asarray(s[k], np.int64))
        self.threshold_ = np.asarray(s["threshold_"], float)
        self.value_ = np.asarray(s["value_"], float)


class XGBRegressor(Regressor):
    """Gradient-boosted trees from XGBoost (CPU build); saved in XGBoost's own JSON format."""

    kind = "xgboost"
    payload_suffix = ".xgb.json"

    def __init__(self, n_estimators: int = 300, max_depth: int = 3, learning_rate: float = 0.05,
                 subsample: float = 0.8, colsample_bytree: float = 0.8, min_child_weight: float = 1.0,
                 objective: str = "reg:squarederror", quantile_alpha: float = 0.5, seed: int = 0) -> None:
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.min_child_weight = min_child_weight
        self.objective = objective
        self.quantile_alpha = quantile_alpha
        self.seed = seed

    def _booster_params(self) -> dict[str, Any]:
        p = {"max_depth": self.max_depth, "eta": self.learning_rate, "subsample": self.subsample,
             "colsample_bytree": self.colsample_bytree, "min_child_weight": self.min_child_weight,
             "objective": self.objective, "seed": self.seed, "nthread": 1, "verbosity": 0}
        if self.objective == "reg:quantileerror":
            p["quantile_alpha"] = self.quantile_alpha
        return p

    def fit(self, X: Any, y: Any) -> XGBRegressor:
        import xgboost as xgb

        dtrain = xgb.DMatrix(_as_2d(X), label=np.asarray(y, float))
        self.booster_ = xgb.train(self._booster_params(), dtrain, num_boost_round=self.n_estimators)
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return np.asarray(self.booster_.inplace_predict(_as_2d(X)), float)

    def payload(self) -> str:
        self._check_fitted()
        return bytes(self.booster_.save_raw(raw_format="json")).decode("utf-8")

    def _load_payload(self, payload: str) -> None:
        import xgboost as xgb

        self.booster_ = xgb.Booster(params={"nthread": 1})
        self.booster_.load_model(bytearray(payload.encode("utf-8")))


class LGBMRegressor(Regressor):
    """LightGBM trees; ``objective='quantile'`` gives the over-predicting memory model.
    Saved in LightGBM's text model format."""

    kind = "lightgbm"
    payload_suffix = ".lgb.txt"

    def __init__(self, n_estimators: int = 300, num_leaves: int = 8, learning_rate: float = 0.05,
                 min_child_samples: int = 5, subsample: float = 1.0, colsample_bytree: float = 1.0,
                 objective: str = "regression", alpha: float = 0.5, seed: int = 0) -> None:
        self.n_estimators = n_estimators
        self.num_leaves = num_leaves
        self.learning_rate = learning_rate
        self.min_child_samples = min_child_samples
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.objective = objective
        self.alpha = alpha
        self.seed = seed

    def fit(self, X: Any, y: Any) -> LGBMRegressor:
        import lightgbm as lgb

        params = {"objective": self.objective, "alpha": self.alpha, "num_leaves": self.num_leaves,
                  "learning_rate": self.learning_rate, "min_child_samples": self.min_child_samples,
                  "bagging_fraction": self.subsample, "bagging_freq": 1 if self.subsample < 1 else 0,
                  "feature_fraction": self.colsample_bytree, "seed": self.seed, "num_threads": 1,
                  "deterministic": True, "verbose": -1, "min_data_in_bin": 1}
        ds = lgb.Dataset(_as_2d(X), label=np.asarray(y, float), params={"verbose": -1, "min_data_in_bin": 1})
        self.booster_ = lgb.train(params, ds, num_boost_round=self.n_estimators)
        return self

    def predict(self, X: Any) -> np.ndarray:
        self._check_fitted()
        return np.asarray(self.booster_.predict(_as_2d(X), num_threads=1), float)

    def payload(self) -> str:
        self._check_fitted()
        return self.booster_.model_to_string()

    def _load_payload(self, payload: str) -> None:
        import lightgbm as lgb

        self.booster_ = lgb.Booster(model_str=payload)


REGISTRY: dict[str, type[Regressor]] = {
    c.kind: c for c in (DummyRegressor, LinearRegressor, ForestRegressor, XGBRegressor, LGBMRegressor,
                     RooflineRegressor)
}


def make(kind: str, **params: Any) -> Regressor:
    """Build a regressor by its saved ``kind`` name."""
    try:
        return REGISTRY[kind](**params)
    except KeyError:
        raise ValueError(f"unknown regressor kind {kind!r}; known: {sorted(REGISTRY)}") from None
