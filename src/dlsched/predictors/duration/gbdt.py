"""ML estimate P_M: a LightGBM GBDT on encoded job features, predicting log duration.

Log target because durations span seconds to weeks: squared error on raw seconds would be
dominated by a few month-long jobs, while QSSF only needs a good *ordering*. LightGBM is
imported lazily so that importing dlsched stays light.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from dlsched.predictors.duration.features import CATEGORICAL, FEATURES


@dataclass(frozen=True)
class GBDTParams:
    """The LightGBM hyper-parameters of P_M, with their defaults, written down once.

    The batch and the online estimator both expose them under these names: their ``__init__``
    defaults read this class, and both build their model through :meth:`model`, so the two
    cannot train different P_M models by drifting apart.
    """

    n_estimators: int = 100
    learning_rate: float = 0.1
    num_leaves: int = 31
    min_child_samples: int = 20
    n_jobs: int = 1
    random_state: int = 0

    @classmethod
    def of(cls, estimator: object) -> GBDTParams:
        """The set as held by an estimator that keeps each value in an attribute of the same name."""
        return cls(**{f.name: getattr(estimator, f.name) for f in fields(cls)})

    def model(self) -> GBDTDurationModel:
        """A new, unfitted P_M with these hyper-parameters."""
        return GBDTDurationModel(**asdict(self))


class GBDTDurationModel:
    """scikit-learn style wrapper: hyper-parameters in ``__init__``, learned state in ``booster_``.

    ``fit(X, durations)`` trains on ``log1p(duration)``; ``predict(X)`` returns seconds.
    ``n_jobs=1`` by default: training sets here are small and a single thread is both faster
    (no thread start-up per refit) and bit-for-bit reproducible.
    """

    def __init__(self, n_estimators: int = GBDTParams.n_estimators,
                 learning_rate: float = GBDTParams.learning_rate, num_leaves: int = GBDTParams.num_leaves,
                 min_child_samples: int = GBDTParams.min_child_samples, max_bin: int = 63,
                 n_jobs: int = GBDTParams.n_jobs, random_state: int = GBDTParams.random_state) -> None:
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.max_bin = max_bin
        self.n_jobs = n_jobs
        self.random_state = random_state

    def _params(self) -> dict:
        return {
            "objective": "regression", "learning_rate": self.learning_rate,
            "num_leaves": self.num_leaves, "min_data_in_leaf": self.min_child_samples,
            "max_bin": self.max_bin, "num_threads": self.n_jobs, "seed": self.random_state,
            "deterministic": True, "force_row_wise": True, "verbose": -1,
        }

    def fit(self, X: np.ndarray, durations: np.ndarray) -> GBDTDurationModel:
        import lightgbm as lgb

        y = np.log1p(np.maximum(np.asarray(durations, dtype=np.float64), 0.0))
        params = self._params()
        data = lgb.Dataset(np.asarray(X, dtype=np.float64), y, feature_name=list(FEATURES),
                           categorical_feature=list(CATEGORICAL), params=params, free_raw_data=True)
        self.booster_ = lgb.train(params, data, num_boost_round=self.n_estimators)
        self.n_train_ = len(y)
        return self

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted durations in seconds (≥ 0)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X.reshape(1, -1)
        out = self.booster_.predict(X, num_threads=self.n_jobs)
        return np.maximum(np.expm1(out), 0.0)
