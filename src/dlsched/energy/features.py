"""Causal features for node-demand forecasting.

Every value-derived feature of the row for time ``t`` is computed from the series shifted by
``horizon`` steps, i.e. from observations at ``t - horizon`` or earlier. A model trained on these
features therefore forecasts ``horizon`` steps ahead and can never read the value it predicts,
nor anything after the moment the forecast is made.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd


def extend_index(y: pd.Series, steps: int) -> pd.Series:
    """``y`` followed by ``steps`` empty (NaN) future bins on the same grid."""
    if steps <= 0:
        return y
    freq = y.index.freq
    future = pd.date_range(y.index[-1] + freq, periods=steps, freq=freq, name=y.index.name)
    return pd.concat([y, pd.Series(np.nan, index=future, name=y.name)])


def make_features(y: pd.Series, horizon: int, windows: Sequence[int], ewm_alpha: float,
                  holidays: frozenset[pd.Timestamp]) -> pd.DataFrame:
    """Feature table indexed like ``y``: calendar, rolling statistics, a hard and a soft lag.

    * calendar: hour of day, weekday, holiday flag (of the predicted time, known in advance);
    * trend: rolling mean / median / std over ``windows`` steps (up to one day back), ending
      ``horizon`` steps before the predicted time;
    * ``lag``: the value ``horizon`` steps back (3 h with the defaults);
    * ``soft_lag``: an exponentially weighted average ending at that same point, a lag that
      forgets gradually instead of at one step, which is less noisy than the hard lag.
    """
    idx = y.index
    base = y.shift(horizon)
    cols: dict[str, np.ndarray | pd.Series] = {
        "hour": idx.hour.to_numpy(),
        "weekday": idx.day_of_week.to_numpy(),
        "holiday": idx.normalize().isin(list(holidays)).astype(np.int8),
        "lag": base,
        "soft_lag": base.ewm(alpha=ewm_alpha, ignore_na=True).mean(),
    }
    for w in windows:
        roll = base.rolling(w, min_periods=1)
        cols[f"mean_{w}"] = roll.mean()
        cols[f"median_{w}"] = roll.median()
        cols[f"std_{w}"] = roll.std()
    return pd.DataFrame(cols, index=idx)
