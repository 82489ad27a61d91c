"""What power controllers say and hear: actions, the controller protocol and shared bookkeeping.

Controllers are small state machines. The host (the occupancy replay here, the event-driven
simulator later, a live agent one day) feeds them stimuli and carries out the actions they
return; a controller never touches nodes itself and never asks whether it is simulated.

Times are seconds on any fixed origin (floats), so simulated and wall-clock hosts both fit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class PowerOn:
    """Boot ``nodes`` powered-off nodes now; they can take jobs from ``ready_at`` on."""

    time: float
    nodes: int
    ready_at: float


@dataclass(frozen=True, slots=True)
class PowerOff:
    """Power off ``nodes`` idle, ready nodes now."""

    time: float
    nodes: int


Action = PowerOn | PowerOff


class ForecastSource(Protocol):
    """Demand forecasts as known at a given time (what a forecaster can say without the future)."""

    def forecast(self, time: float) -> Sequence[float]:
        """Predicted busy nodes for the control steps ``time, time + period, ...``.

        Element 0 is the prediction for the current step; the sequence may be shorter than the
        controller's look-ahead when the forecaster's horizon is shorter (never padded with guesses).
        """
        ...


class PowerController(Protocol):
    """Stimuli every power controller accepts; each returns the actions to carry out."""

    total_nodes: int
    powered_on: int

    def start(self, time: float, running_nodes: int) -> list[Action]:
        """Begin managing a cluster whose nodes are all powered on, ``running_nodes`` of them busy."""
        ...

    def observe(self, time: float, running_nodes: int) -> list[Action]:
        """The number of busy nodes is now ``running_nodes`` (call on every change, or per period)."""
        ...

    def job_arrival(self, time: float, needed_nodes: int, available_nodes: int | None = None) -> list[Action]:
        """A job needing ``needed_nodes`` nodes arrived; ``available_nodes`` free powered-on nodes
        are left for it (default: powered on minus busy, as last observed)."""
        ...


@dataclass(slots=True)
class ControllerStats:
    """Counts a report needs; kept by the controller so every host reports the same way."""

    wakeups: int = 0
    woken_nodes: int = 0
    poweroffs: int = 0
    powered_off_nodes: int = 0

    def record(self, action: Action) -> None:
        if isinstance(action, PowerOn):
            self.wakeups += 1
            self.woken_nodes += action.nodes
        else:
            self.poweroffs += 1
            self.powered_off_nodes += action.nodes


class BootTracker:
    """Nodes that were told to boot and are not ready yet (so they cannot be powered off)."""

    __slots__ = ("_pending",)

    def __init__(self) -> None:
        self._pending: list[tuple[float, int]] = []

    def add(self, action: PowerOn) -> None:
        self._pending.append((action.ready_at, action.nodes))

    def booting(self, time: float) -> int:
        self._pending = [(t, n) for t, n in self._pending if t > time]
        return sum(n for _, n in self._pending)
