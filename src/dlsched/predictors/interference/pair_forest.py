"""Co-scheML's interference model: a random forest on both jobs' single-job metrics.

Co-scheML (§3A) regresses the co-execution/alone time ratio on the profiled metrics of the job and
its partner with scikit-learn's random forest. Each measured pair gives two rows (each job in
turn is "the job"). The target is log(s), so that errors are relative, as MAPE counts them.
Features: :data:`~dlsched.predictors.interference.features.PAIR_FEATURES`; columns that are
unknown for every training row are dropped. A forest call costs milliseconds whatever the batch,
so answers are cached by feature row: a policy asking about the same pair again pays nothing. The GPU type is not a feature: the forest learns
across types from the jobs' own metrics (isolated throughput carries the GPU's speed).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from dlsched.predictors.interference.base import JobProfile, PairObservation
from dlsched.predictors.interference.features import PAIR_FEATURES, pair_matrix
from dlsched.predictors.interference.pairwise import PairwiseModel, training_sides

#: cached answers kept per fitted forest before the cache starts afresh
CACHE_LIMIT = 200_000


class PairForest(PairwiseModel):
    """Random-forest pair model (small by default: it is refitted once per evaluation fold)."""

    name = "pair-forest"

    def __init__(self, n_estimators: int = 50, min_samples_leaf: int = 10, max_features: float = 0.5,
                 seed: int = 0) -> None:
        self.n_estimators = n_estimators
        self.min_samples_leaf = min_samples_leaf
        self.max_features = max_features
        self.seed = seed

    def fit(self, pairs: Sequence[PairObservation]) -> PairForest:
        from sklearn.ensemble import RandomForestRegressor

        a, b, _, s = training_sides(pairs)
        if len(s) == 0:
            raise ValueError("PairForest.fit: no feasible pairs to learn from")
        X = pair_matrix(a, b)
        self.columns_ = np.flatnonzero(np.isfinite(X).any(axis=0))
        if len(self.columns_) == 0:
            raise ValueError("PairForest.fit: every job metric is unknown (NaN); nothing to learn from")
        self.features_ = [PAIR_FEATURES[i] for i in self.columns_]
        self.forest_ = RandomForestRegressor(n_estimators=self.n_estimators, min_samples_leaf=self.min_samples_leaf,
                                             max_features=self.max_features, random_state=self.seed, n_jobs=1)
        self.forest_.fit(X[:, self.columns_], np.log(s))
        self.cache_: dict[bytes, float] = {}
        return self

    def pair_slowdowns(self, a: Sequence[JobProfile], b: Sequence[JobProfile],
                       gpu_types: Sequence[str]) -> np.ndarray:
        if not len(a):
            return np.zeros(0)
        X = np.ascontiguousarray(pair_matrix(a, b)[:, self.columns_])
        keys = [row.tobytes() for row in X]
        miss = [i for i, k in enumerate(keys) if k not in self.cache_]
        if miss:
            if len(self.cache_) + len(miss) > CACHE_LIMIT:
                self.cache_.clear()
            for i, v in zip(miss, np.exp(self.forest_.predict(X[miss]))):
                self.cache_[keys[i]] = float(v)
        return np.array([self.cache_[k] for k in keys], dtype=float)
