"""The CES node controller: Helios Algorithm 2 (JobArrivalCheck + PeriodicCheck) as a state machine.

Usage by a host (replay or event-driven simulator)::

    ctl = CESController(total_nodes=420, forecast=source, params=CESParams())
    actions = ctl.start(t0, running)           # power off down to running + buffer
    actions = ctl.job_arrival(t, needed_nodes)  # wake R - C_A + buffer nodes when short
    actions = ctl.observe(t, running)           # record demand; runs PeriodicCheck every period

Conventions (matching the reference CES_Philly, described in reference-simulators.md §3.2):

* PeriodicCheck runs at most once per ``period`` (10 min), at the first ``observe`` at or after
  the next check time. The history trend compares the mean of the ``history`` previous check
  samples with the current sample; the predicted trend compares the current sample with the mean
  forecast of the next ``future`` steps. Both must be ``>= xi`` and the forecast for the next step
  must not be above the one for this step ("prediction not rising"). Nodes are then powered off
  down to ``running + buffer`` if that frees at least ``de_threshold`` nodes.
* A wake-up powers on ``shortfall + buffer`` nodes at once (capped by the powered-off nodes) and
  freezes power-off for the next ``keep`` checks, so a burst is not followed by a premature sleep.
* ``observe`` with more busy nodes than powered-on ones (a replayed series, where demand is seen
  only after the fact) is handled as a job arrival for the excess.
* Only the forecasts the source can give at the check time are used: with a 3-h forecaster the
  look-ahead is the next 18 steps even when ``future`` is 30 (the paper: "typically 3 hours").
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np

from dlsched.energy.actions import Action, BootTracker, ControllerStats, ForecastSource, PowerOff, PowerOn


@dataclass(frozen=True, slots=True)
class CESParams:
    """Hyper-parameters of Algorithm 2; defaults are the reference's Philly values."""

    history: int = 2          # past checks in RecentNodesTrend
    future: int = 30          # future steps in FutureNodesTrend (capped by the forecast horizon)
    xi_h: float = 0.1         # threshold on the recent downward trend (nodes)
    xi_p: float = 0.0         # threshold on the predicted downward trend (nodes)
    de_threshold: int = 1     # smallest number of nodes worth powering off
    buffer: int = 20          # sigma: spare powered-on nodes kept for unexpected jobs
    keep: int = 10            # checks without power-off after a wake-up
    period: float = 600.0     # seconds between PeriodicChecks
    boot_delay: float = 300.0  # seconds from power-on until a node can take jobs

    def __post_init__(self) -> None:
        if self.history < 1 or self.future < 1 or self.period <= 0:
            raise ValueError("history and future must be >= 1 and period > 0")
        if self.buffer < 0 or self.keep < 0 or self.boot_delay < 0 or self.de_threshold < 1:
            raise ValueError("buffer, keep and boot_delay must be >= 0 and de_threshold >= 1")


class CESController:
    """Prediction-guided Dynamic Resource Sleep; see the module docstring for the protocol."""

    def __init__(self, total_nodes: int, forecast: ForecastSource, params: CESParams | None = None) -> None:
        if total_nodes < 1:
            raise ValueError("total_nodes must be >= 1")
        self.total_nodes = total_nodes
        self.params = params or CESParams()
        self.stats = ControllerStats()
        self.powered_on = total_nodes
        self.running = 0
        self._forecast = forecast
        self._boots = BootTracker()
        self._history: deque[int] = deque(maxlen=self.params.history)
        self._hold = 0
        self._next_check: float | None = None

    # ---- stimuli -------------------------------------------------------------------------------
    def start(self, time: float, running_nodes: int) -> list[Action]:
        """Take over an all-on cluster: keep ``running + buffer`` nodes, power off the rest."""
        self.running = running_nodes
        self._next_check = time
        keep_on = min(self.total_nodes, running_nodes + self.params.buffer)
        return self._power_off(time, self.powered_on - keep_on) if keep_on < self.powered_on else []

    def job_arrival(self, time: float, needed_nodes: int, available_nodes: int | None = None) -> list[Action]:
        """JobArrivalCheck: wake ``R - C_A + buffer`` nodes when the free ones do not suffice."""
        free = self.powered_on - self.running if available_nodes is None else available_nodes
        return self._wake(time, needed_nodes - free) if needed_nodes > free else []

    def observe(self, time: float, running_nodes: int) -> list[Action]:
        """Record demand; at each period boundary run PeriodicCheck on it."""
        if self._next_check is None:
            raise RuntimeError("call start() before observe()")
        self.running = running_nodes
        actions: list[Action] = []
        if running_nodes > self.powered_on:
            actions = self._wake(time, running_nodes - self.powered_on)
        if time < self._next_check:
            return actions
        self._next_check += self.params.period * (1 + (time - self._next_check) // self.params.period)
        if not actions:
            if self._hold > 0:
                self._hold -= 1
            elif self._should_sleep(time, running_nodes):
                surplus = self.powered_on - (running_nodes + self.params.buffer)
                surplus = min(surplus, self.powered_on - running_nodes - self._boots.booting(time))
                if surplus >= self.params.de_threshold:
                    actions = self._power_off(time, surplus)
        self._history.append(running_nodes)
        return actions

    # ---- decisions -----------------------------------------------------------------------------
    def _should_sleep(self, time: float, now: int) -> bool:
        """RecentNodesTrend >= xi_H and FutureNodesTrend >= xi_P, forecast not rising."""
        p = self.params
        if len(self._history) < p.history:
            return False
        if float(np.mean(self._history)) - now < p.xi_h:
            return False
        fc = np.asarray(self._forecast.forecast(time), dtype=float)
        if fc.size < 2:
            return False
        ahead = fc[1:1 + p.future]
        return now - float(ahead.mean()) >= p.xi_p and fc[1] <= fc[0]

    def _wake(self, time: float, shortfall: int) -> list[Action]:
        n = min(self.total_nodes - self.powered_on, shortfall + self.params.buffer)
        self._hold = self.params.keep
        if n <= 0:
            return []
        action = PowerOn(time, n, time + self.params.boot_delay)
        self.powered_on += n
        self._boots.add(action)
        self.stats.record(action)
        return [action]

    def _power_off(self, time: float, n: int) -> list[Action]:
        action = PowerOff(time, n)
        self.powered_on -= n
        self.stats.record(action)
        return [action]
