"""The node-demand forecasters: causal by construction, deterministic, and better than naive."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from dlsched.energy.forecaster import NodeDemandForecaster, SeasonalNaiveForecaster
from dlsched.energy.metrics import smape


def synthetic(days: int = 21, seed: int = 1) -> pd.Series:
    """A daily wave plus a weekday effect and noise, at 10-minute steps."""
    idx = pd.date_range("2020-03-02", periods=days * 144, freq="10min")
    rng = np.random.default_rng(seed)
    hours = idx.hour.to_numpy() + idx.minute.to_numpy() / 60
    wave = 100 + 30 * np.sin(2 * np.pi * hours / 24) + 10 * (idx.day_of_week.to_numpy() < 5)
    return pd.Series(np.round(wave + rng.normal(0, 3, len(idx))), index=idx, name="active")


def small_model(**kw) -> NodeDemandForecaster:
    return NodeDemandForecaster(n_estimators=60, holidays="none", **kw)


def test_forecaster_never_sees_the_future() -> None:
    y = synthetic()
    cut = 18 * 144
    model = small_model().fit(y.iloc[:cut])
    base = model.predict(y)
    assert len(base) == len(y) + model.horizon_ and base.notna().all()
    # Scramble everything after `cut`: forecasts up to cut + horizon must not move.
    scrambled = y.copy()
    scrambled.iloc[cut:] = 1000.0
    moved = model.predict(scrambled)
    h = model.horizon_
    assert np.array_equal(base.iloc[: cut + h].to_numpy(), moved.iloc[: cut + h].to_numpy())
    assert not np.array_equal(base.iloc[cut + h:].to_numpy(), moved.iloc[cut + h:].to_numpy())
    # Truncating the input gives the same forecasts for the times it covers (and h bins beyond).
    short = model.predict(y.iloc[:cut])
    assert np.array_equal(short.to_numpy(), base.iloc[: cut + h].to_numpy())


def test_fit_uses_only_the_given_past() -> None:
    y = synthetic()
    a = small_model(seed=3).fit(y.iloc[: 14 * 144])
    b = small_model(seed=3).fit(y.iloc[: 14 * 144])
    assert a.train_end_ == y.index[14 * 144 - 1]
    assert np.array_equal(a.predict(y).to_numpy(), b.predict(y).to_numpy())  # deterministic
    c = small_model(seed=3).fit(y.iloc[: 15 * 144])  # one more day of data changes the model
    assert not np.array_equal(a.predict(y).to_numpy(), c.predict(y).to_numpy())


def test_lightgbm_beats_seasonal_naive_on_synthetic() -> None:
    y = synthetic()
    past, test = y.iloc[: 18 * 144], y.iloc[18 * 144:]
    gbm = small_model().fit(past).predict(y).reindex(test.index)
    naive = SeasonalNaiveForecaster(144).fit(past).predict(y).reindex(test.index)
    assert smape(test, gbm) < smape(test, naive) < 10


def test_seasonal_naive_is_the_value_a_season_ago() -> None:
    y = synthetic(days=3)
    pred = SeasonalNaiveForecaster(144).fit(y).predict(y)
    assert len(pred) == len(y) + 144
    assert np.array_equal(pred.iloc[144:288].to_numpy(), y.iloc[:144].to_numpy())
    assert np.array_equal(pred.iloc[-144:].to_numpy(), y.iloc[-144:].to_numpy())


def test_forecaster_input_checks() -> None:
    y = synthetic(days=3)
    with pytest.raises(RuntimeError):
        small_model().predict(y)
    with pytest.raises(ValueError, match="regular DatetimeIndex"):
        small_model().fit(pd.Series([1.0, 2.0]))
    with pytest.raises(ValueError, match="too little"):
        small_model().fit(y.iloc[:100])
    with pytest.raises(ValueError, match="holiday calendar"):
        NodeDemandForecaster(holidays="mars").fit(y)
