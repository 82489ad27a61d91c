"""Replay of a node-occupancy series through a power controller (Table 5-style evaluation).

The busy-node series is taken as given demand: the controller cannot delay it, so when demand
exceeds the powered-on nodes the excess is counted as waiting for ``boot_delay`` (the cost the
paper attributes to wake-ups) and the controller wakes nodes. Conventions, as in the reference:

* one step per 10-minute bin holding the bin's maximum busy nodes;
* the powered-on count of a step is the one after that step's actions;
* node utilisation = mean over steps of busy / capacity (capacity = total nodes before, powered-on
  nodes after), i.e. the average of per-step ratios;
* days = steps × step / 24 h; nodes per wake-up = woken nodes / wake-ups (the start-up power-off
  is not a wake-up).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from dlsched.energy.actions import PowerController, PowerOn


def to_seconds(index: pd.DatetimeIndex) -> np.ndarray:
    """Timestamps as float seconds since the Unix epoch (the controllers' time axis)."""
    return index.as_unit("ns").asi8 / 1e9


class SeriesForecast:
    """Forecast source over precomputed predictions, cut at what is knowable at query time.

    ``predicted`` must come from a forecaster whose predictions for time ``t`` use data up to
    ``t - horizon`` steps; a query at ``t`` then returns the predictions for ``t .. t + horizon``.
    """

    def __init__(self, predicted: pd.Series, horizon: int) -> None:
        self._times = to_seconds(pd.DatetimeIndex(predicted.index))
        self._values = predicted.to_numpy(dtype=float)
        self._horizon = horizon

    def forecast(self, time: float) -> Sequence[float]:
        i = int(np.searchsorted(self._times, time))
        if i >= len(self._times) or self._times[i] != time:
            raise KeyError(f"no forecast for time {pd.Timestamp(time, unit='s')}")
        return self._values[i:i + self._horizon + 1]


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """Per-step trajectory and counts of one replay."""

    time: pd.DatetimeIndex
    active: np.ndarray
    total: np.ndarray
    powered_on: np.ndarray
    wakeups: int
    woken_nodes: int
    waiting_node_minutes: float
    step_minutes: float

    @property
    def days(self) -> float:
        return len(self.time) * self.step_minutes / 1440.0

    def summary(self) -> dict[str, float | int]:
        """The Table 5 figures (utilisations as fractions)."""
        off = self.total - self.powered_on
        with np.errstate(divide="ignore", invalid="ignore"):
            util_after = np.where(self.powered_on > 0, self.active / self.powered_on, 0.0)
        return {
            "steps": len(self.time),
            "days": self.days,
            "avg_powered_off_nodes": float(off.mean()),
            "wakeups": self.wakeups,
            "daily_wakeups": self.wakeups / self.days,
            "woken_nodes": self.woken_nodes,
            "nodes_per_wakeup": self.woken_nodes / self.wakeups if self.wakeups else 0.0,
            "node_util_before": float(np.mean(self.active / self.total)),
            "node_util_after": float(np.mean(util_after)),
            "waiting_node_minutes": self.waiting_node_minutes,
            "powered_off_node_hours": float(off.sum() * self.step_minutes / 60.0),
        }


def replay(controller: PowerController, active: pd.Series, total: pd.Series,
           boot_delay_s: float) -> ReplayResult:
    """Drive ``controller`` with one ``observe`` per bin of ``active`` (no gaps allowed)."""
    if len(active) == 0 or active.isna().any() or total.isna().any():
        raise ValueError("replay needs a non-empty series without gaps")
    times = to_seconds(pd.DatetimeIndex(active.index))
    busy = active.to_numpy(dtype=float).astype(np.int64)
    powered = np.empty(len(busy), dtype=np.int64)
    controller.start(times[0], int(busy[0]))
    waiting = 0.0
    for i, (t, r) in enumerate(zip(times, busy, strict=True)):
        shortfall = int(r) - controller.powered_on
        actions = controller.observe(t, int(r))
        if shortfall > 0 and any(isinstance(a, PowerOn) for a in actions):
            waiting += shortfall * boot_delay_s / 60.0
        powered[i] = controller.powered_on
    stats = controller.stats  # type: ignore[attr-defined]
    step_minutes = pd.Timedelta(active.index.freq).total_seconds() / 60.0
    return ReplayResult(pd.DatetimeIndex(active.index), busy.astype(float), total.to_numpy(dtype=float),
                        powered.astype(float), stats.wakeups, stats.woken_nodes, waiting, step_minutes)
