"""One conformance test over every estimator: the scikit-learn conventions the brief asks for
and a safe save/restore that reproduces predictions exactly."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from dlsched.predictors.resources.memory import (
    FakeTensorBaseline,
    FakeTensorMemoryEstimator,
    HorusEq2Estimator,
    LinearMemoryEstimator,
)
from dlsched.predictors.resources.regressors import (
    DummyRegressor,
    ForestRegressor,
    LGBMRegressor,
    LinearRegressor,
    XGBRegressor,
)

SMALL = {ForestRegressor: {"n_estimators": 15}, XGBRegressor: {"n_estimators": 20},
         LGBMRegressor: {"n_estimators": 20}, FakeTensorMemoryEstimator: {"n_estimators": 20}}
class HuberLinear(LinearRegressor):
    """The robust variant as its own conformance case."""

    def __init__(self, alpha: float = 1.0, loss: str = "huber", epsilon: float = 1.35, seed: int = 0) -> None:
        super().__init__(alpha=alpha, loss=loss, epsilon=epsilon, seed=seed)


ALL = [DummyRegressor, LinearRegressor, HuberLinear, ForestRegressor, XGBRegressor, LGBMRegressor,
       HorusEq2Estimator, LinearMemoryEstimator, FakeTensorBaseline, FakeTensorMemoryEstimator]


def _data(n: int = 80) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1)
    X = np.abs(rng.normal(size=(n, 4))) * [100, 2, 64, 32] + [1, 0.1, 1, 1]
    y = 1500 + 4 * X[:, 0] + X[:, 1] * X[:, 2] + rng.normal(0, 5, n)
    return X, y


@pytest.mark.parametrize("cls", ALL, ids=lambda c: c.__name__)
def test_estimator_conformance(cls: type) -> None:
    X, y = _data()
    est = cls(**SMALL.get(cls, {}))
    params = est.get_params()
    assert "seed" in params, "seed must be a hyper-parameter"
    assert set(params) == {p for p in inspect.signature(cls.__init__).parameters if p != "self"}
    assert not [k for k in vars(est) if k.endswith("_")], "no learned state before fit"
    with pytest.raises(RuntimeError):
        est.predict(X)
    assert est.fit(X, y) is est
    assert est.get_params() == params, "fit must not change hyper-parameters"
    learned = [k for k in vars(est) if k not in params]
    assert learned and all(k.endswith("_") for k in learned), learned
    pred = est.predict(X)
    assert pred.shape == (len(X),) and np.isfinite(pred).all()
    again = cls(**SMALL.get(cls, {})).fit(X, y).predict(X)
    np.testing.assert_array_equal(pred, again)  # same seed, same model
    restored = cls.restore(est.get_params(), est.payload())
    np.testing.assert_array_equal(restored.predict(X), pred)
    np.testing.assert_array_equal(restored.predict(X[:1]), pred[:1])
    with pytest.raises(ValueError):
        est.predict(X[0])  # 1-D input is refused with a clear error


def test_learning_regressors_beat_dummy() -> None:
    X, y = _data(200)
    tr, te = slice(0, 150), slice(150, None)
    base = np.abs(DummyRegressor().fit(X[tr], y[tr]).predict(X[te]) - y[te]).mean()
    for cls in (LinearRegressor, ForestRegressor, XGBRegressor, LGBMRegressor):
        err = np.abs(cls(**SMALL.get(cls, {})).fit(X[tr], y[tr]).predict(X[te]) - y[te]).mean()
        assert err < 0.6 * base, (cls.__name__, err, base)


def test_huber_ignores_an_outlier() -> None:
    x = np.arange(20, dtype=float)[:, None]
    y = 2 * x[:, 0] + 1
    y[3] += 100  # one data-loading-bound "architecture"
    robust = LinearRegressor(alpha=0.0, loss="huber", epsilon=1.1).fit(x, y)
    plain = LinearRegressor(alpha=0.0).fit(x, y)
    np.testing.assert_allclose(robust.predict([[30.0]]), [61.0], rtol=1e-3)
    assert abs(plain.predict([[30.0]])[0] - 61.0) > 1.0


def test_forest_matches_scikit_learn() -> None:
    from sklearn.ensemble import RandomForestRegressor

    X, y = _data()
    ours = ForestRegressor(n_estimators=10, max_features=0.5, seed=3).fit(X, y).predict(X)
    ref = RandomForestRegressor(n_estimators=10, max_features=0.5, random_state=3, n_jobs=1).fit(X, y).predict(X)
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
