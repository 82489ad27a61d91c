"""ML estimate P_M: a LightGBM GBDT on encoded job features, predicting log duration.

Log target because durations span seconds to weeks: squared error on raw seconds would be
dominated by a few month-long jobs, while QSSF only needs a good *ordering*. LightGBM is
imported lazily so that importing dlsched stays light.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields

import numpy as np

from dlsched.predictors.duration.features import CATEGORICAL, FEATURES

_expm1, _maximum = np.expm1, np.maximum


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
        self.__dict__.pop("_single", None)  # the fast path belongs to the booster it was set up for
        return self

    def __getstate__(self) -> dict:
        """Copies and pickles leave the single-row fast path behind (C pointers); it is set up
        again at the first ``predict_one``."""
        state = dict(self.__dict__)
        state.pop("_single", None)
        return state

    def predict(self, X: np.ndarray) -> np.ndarray:
        """Predicted durations in seconds (≥ 0)."""
        X = np.asarray(X, dtype=np.float64)
        if X.ndim == 1:
            X = X.reshape(1, -1)
        out = self.booster_.predict(X, num_threads=self.n_jobs)
        return np.maximum(np.expm1(out), 0.0)

    def predict_one(self, row: list[float]) -> float:
        """One job's predicted duration in seconds: ``predict`` of a one-row matrix, bit for bit,
        through LightGBM's single-row C entry point where it has one (an online estimator asks
        once per submitted job; the general entry point costs ~0.3 ms of checks per call)."""
        fast = self.__dict__.get("_single")
        if fast is None:
            fast = self._single = SingleRow.of(self.booster_, len(row)) or False
        if fast is False:
            return float(self.predict(np.array(row))[0])
        return fast.seconds(row)


class SingleRow:
    """LightGBM's fast single-row prediction (``LGBM_BoosterPredictForMatSingleRowFast``): the
    configuration is set up once per fitted booster, then each call copies one row into a
    buffer and reads one raw score -- the same trees, summed in the same order, as ``predict``."""

    PREDICT_NORMAL, FLOAT64 = 0, 1  # C_API_PREDICT_NORMAL, C_API_DTYPE_FLOAT64

    def __init__(self, lib, config, ncol: int) -> None:
        import ctypes

        self._lib, self._config = lib, config
        self._row = np.empty(ncol, dtype=np.float64)
        self._out = np.empty(1, dtype=np.float64)
        self._len = ctypes.c_int64()
        self._row_ptr = self._row.ctypes.data_as(ctypes.c_void_p)
        self._out_ptr = self._out.ctypes.data_as(ctypes.POINTER(ctypes.c_double))
        self._len_ref = ctypes.byref(self._len)
        self._predict = lib.LGBM_BoosterPredictForMatSingleRowFast

    @classmethod
    def of(cls, booster, ncol: int) -> SingleRow | None:
        """The fast path for ``booster``, or None where this LightGBM lacks the entry point."""
        import ctypes

        try:
            from lightgbm.basic import _LIB as lib
        except ImportError:
            return None
        handle = getattr(booster, "_handle", None)
        if handle is None or not hasattr(lib, "LGBM_BoosterPredictForMatSingleRowFastInit"):
            return None
        config = ctypes.c_void_p()
        rc = lib.LGBM_BoosterPredictForMatSingleRowFastInit(
            handle, ctypes.c_int(cls.PREDICT_NORMAL), ctypes.c_int(0), ctypes.c_int(-1), ctypes.c_int(cls.FLOAT64),
            ctypes.c_int32(ncol), ctypes.c_char_p(b"num_threads=1"), ctypes.byref(config))
        return cls(lib, config, ncol) if rc == 0 else None

    def __call__(self, row: list[float]) -> np.ndarray:
        """The raw score (log1p of seconds) of ``row``, as a one-element array."""
        self._row[:] = row
        if self._predict(self._config, self._row_ptr, self._len_ref, self._out_ptr) != 0:
            raise RuntimeError("LightGBM single-row prediction failed")
        return self._out.copy()

    def seconds(self, row: list[float]) -> float:
        """``predict_one``'s answer: expm1 of the raw score, at least 0, through the same numpy
        ufuncs on the one-element output buffer as ``predict`` (no copies: the hot path)."""
        self._row[:] = row
        if self._predict(self._config, self._row_ptr, self._len_ref, self._out_ptr):
            raise RuntimeError("LightGBM single-row prediction failed")
        out = self._out
        return float(_maximum(_expm1(out), 0.0)[0])

    def __del__(self) -> None:
        free = getattr(getattr(self, "_lib", None), "LGBM_FastConfigFree", None)
        if free is not None:
            free(self._config)
