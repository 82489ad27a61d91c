"""Node-demand forecasts inside a job simulation, from what the simulation has observed so far.

The simulator reports busy nodes as time passes; this source keeps the 10-minute maxima of that
series and refits a :class:`NodeDemandForecaster` once per ``refit_every`` simulated seconds on
the bins already completed (never on the future). Until enough history exists (``min_days``),
or if the fit fails for lack of data, it forecasts "same as the last completed bin" so the
controller stays conservative.

The model learns the *change* of demand over the forecast horizon, not its level: a level model
refitted on the busy first days of a workload cannot forecast below the lowest demand it has
seen (trees do not extrapolate), so once a workload drains it kept forecasting 25-47 busy nodes
while 1-7 were busy, CES's "demand will fall" test never passed, and 65 of 98 nodes stayed on
for the last nine days of the built-in workload (tests/test_energy_online_tail.py).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import pandas as pd

from dlsched.energy.forecaster import NodeDemandForecaster

STEP = 600.0


class OnlineDemandForecast:
    """A ``ForecastSource`` over a series that grows while the simulation runs."""

    def __init__(self, origin: pd.Timestamp | None = None, horizon: int = 18, refit_every: float = 86400.0,
                 min_days: float = 3.0, n_estimators: int = 100, seed: int = 0) -> None:
        self.origin = pd.Timestamp(origin) if origin is not None else pd.Timestamp("2000-01-03")
        self.horizon = horizon
        self.refit_every = refit_every
        self.min_days = min_days
        self.n_estimators = n_estimators
        self.seed = seed
        self._bins: list[float] = []     # max busy nodes per completed 10-minute bin
        self._cur_bin = 0
        self._cur_max = 0.0
        self._t0: float | None = None
        self._model: NodeDemandForecaster | None = None
        self._next_fit = 0.0
        self.refits = 0

    def record(self, time: float, busy_nodes: int) -> None:
        """Busy nodes at ``time`` (non-decreasing times)."""
        if self._t0 is None:
            self._t0 = math.floor(time / STEP) * STEP
            self._next_fit = self._t0 + self.min_days * 86400.0
        b = int((time - self._t0) // STEP)
        while self._cur_bin < b:
            self._bins.append(self._cur_max)
            self._cur_bin += 1
            self._cur_max = float(busy_nodes) if self._cur_bin == b else self._cur_max
        self._cur_max = max(self._cur_max, float(busy_nodes))

    def _series(self, tail: int | None = None) -> pd.Series:
        values = self._bins if tail is None else self._bins[-tail:]
        start_bin = len(self._bins) - len(values)
        index = pd.date_range(self.origin + pd.Timedelta(seconds=self._t0 + start_bin * STEP), periods=len(values),
                              freq="10min")
        return pd.Series(np.asarray(values, dtype=float), index=index)

    def forecast(self, time: float) -> Sequence[float]:
        """Predicted busy nodes for the current bin and the ``horizon`` bins after it."""
        self.record(time, 0) if self._t0 is None else None
        last = self._bins[-1] if self._bins else self._cur_max
        if time >= self._next_fit:
            self._next_fit = time + self.refit_every
            try:
                self._model = NodeDemandForecaster(horizon=self.horizon, n_estimators=self.n_estimators,
                                                   seed=self.seed, target="change").fit(self._series())
                self.refits += 1
            except ValueError:
                self._model = None
        if self._model is None:
            return [last] * (self.horizon + 1)
        tail = self._series(tail=self.horizon + 144 + 36)
        predicted = self._model.predict(tail).to_numpy()
        # predicted[-horizon-1:] covers the last completed bin (~ now) and the bins after it
        return predicted[-(self.horizon + 1):].tolist()
