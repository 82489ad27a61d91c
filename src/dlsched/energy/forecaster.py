"""Node-demand forecasters (scikit-learn style): LightGBM and a seasonal-naive baseline.

Both take a node series on a regular grid (``pandas.Series`` with a ``DatetimeIndex`` that has a
``freq``; NaN = missing bin). ``fit`` learns only from the series it is given, so the caller
decides what "the past" is. ``predict(y)`` is pure and returns, for every time in ``y`` plus the
``horizon_`` bins after its end, the forecast that could have been made ``horizon_`` steps earlier.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Self

import numpy as np
import pandas as pd

from dlsched.energy.features import extend_index, make_features
from dlsched.energy.holidays import holiday_dates


def _check_grid(y: pd.Series) -> None:
    if not isinstance(y.index, pd.DatetimeIndex) or y.index.freq is None:
        raise ValueError("series must have a regular DatetimeIndex with a freq (use load_node_series)")
    if len(y) == 0:
        raise ValueError("series is empty")


TARGETS = ("level", "change")


class NodeDemandForecaster:
    """LightGBM on calendar, rolling-trend and lag features (Helios §4.3.2, CES_Philly).

    ``target="level"`` learns the busy nodes themselves, as the reference does. Trees cannot
    predict outside the range of the values they were trained on, so a level model trained on a
    busy period keeps forecasting that busy level after demand has fallen below anything it saw.
    ``target="change"`` learns the change since the lag (``horizon`` steps back) and adds the lag
    back, which follows demand to new levels; models refitted on a growing series inside a
    simulation use it.
    """

    def __init__(self, horizon: int = 18, windows: Sequence[int] = (6, 12, 36, 72, 144),
                 ewm_alpha: float = 0.5,
                 holidays: str | Iterable[str] = "us", n_estimators: int = 300, learning_rate: float = 0.03,
                 num_leaves: int = 31, min_child_samples: int = 20, warmup: int | None = None,
                 fill_gaps: bool = True, seed: int = 0, n_jobs: int = 1, target: str = "level") -> None:
        self.target = target
        self.horizon = horizon
        self.windows = tuple(windows)
        self.ewm_alpha = ewm_alpha
        self.holidays = holidays
        self.n_estimators = n_estimators
        self.learning_rate = learning_rate
        self.num_leaves = num_leaves
        self.min_child_samples = min_child_samples
        self.warmup = warmup
        self.fill_gaps = fill_gaps
        self.seed = seed
        self.n_jobs = n_jobs

    def _features(self, y: pd.Series) -> pd.DataFrame:
        # A gap (monitoring outage) carries the last value forward: the features then describe the
        # cluster as last seen, which is also all a live service would know.
        y = y.ffill() if self.fill_gaps else y
        return make_features(y, self.horizon, self.windows, self.ewm_alpha, self._holidays_)

    def fit(self, y: pd.Series) -> Self:
        """Learn from ``y`` only; bins whose value or lag is missing are left out."""
        import lightgbm as lgb  # heavy: imported only when a model is trained

        _check_grid(y)
        if self.horizon < 1:
            raise ValueError("horizon must be at least one step")
        if self.target not in TARGETS:
            raise ValueError(f"target must be one of {', '.join(TARGETS)}, got {self.target!r}")
        self._holidays_ = holiday_dates(self.holidays)
        features = self._features(y)
        rows = y.notna().to_numpy() & features["lag"].notna().to_numpy()
        warmup = self.horizon + max(self.windows, default=0) if self.warmup is None else self.warmup
        rows[:warmup] = False  # first bins only feed features: their rolling windows are incomplete
        if rows.sum() < 2 * max(self.windows, default=1):
            raise ValueError(f"too little training data: {int(rows.sum())} usable bins")
        self.model_ = lgb.LGBMRegressor(
            n_estimators=self.n_estimators, learning_rate=self.learning_rate, num_leaves=self.num_leaves,
            min_child_samples=self.min_child_samples, random_state=self.seed, n_jobs=self.n_jobs,
            deterministic=True, force_col_wise=True, verbose=-1)
        goal = y if self.target == "level" else y - features["lag"]
        self.model_.fit(features[rows], goal[rows].to_numpy())
        self.feature_names_ = list(features.columns)
        self.horizon_ = self.horizon
        self.freq_ = y.index.freq
        self.n_train_ = int(rows.sum())
        self.train_end_ = y.index[-1]
        return self

    def predict(self, y: pd.Series) -> pd.Series:
        """Forecasts for ``y``'s times and the ``horizon_`` bins after them (NaN-free).

        With ``target="change"``, the first ``horizon_`` bins of ``y`` have no lag yet; their
        change is added to the first value of ``y`` instead."""
        if not hasattr(self, "model_"):
            raise RuntimeError("call fit() before predict()")
        _check_grid(y)
        ext = extend_index(y, self.horizon_)
        features = self._features(ext)
        values = self.model_.predict(features)
        if self.target == "change":
            values = values + features["lag"].bfill().fillna(0.0).to_numpy()
        return pd.Series(values, index=ext.index, name="predicted")


class SeasonalNaiveForecaster:
    """Baseline: the value one season ago (``season`` steps: 144 = a day, 1008 = a week at 10 min)."""

    def __init__(self, season: int = 144) -> None:
        self.season = season

    def fit(self, y: pd.Series) -> Self:
        _check_grid(y)
        self.horizon_ = self.season
        self.fallback_ = float(np.nanmean(y.to_numpy())) if y.notna().any() else 0.0
        return self

    def predict(self, y: pd.Series) -> pd.Series:
        if not hasattr(self, "horizon_"):
            raise RuntimeError("call fit() before predict()")
        _check_grid(y)
        ext = extend_index(y, self.horizon_)
        out = ext.shift(self.season).ffill().fillna(self.fallback_)
        return out.rename("predicted")
