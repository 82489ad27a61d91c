"""The simulated backend: what a carried-out decision means in a simulation.

The kernel's dispatcher (:class:`dlsched.kernel.decide.Decider`) carries out a decision as a
transition and then tells the backend. Here a start becomes a finish event: with no ground-truth
models the job runs its remaining solo time; with a speed or failure model the physics
(:class:`dlsched.sim.physics.Physics`) rates the job (and re-rates its co-runners) and may arm a
failure. A preemption books the job's work and overhead there too. The live service's backend
turns the same start into a nomination instead (``service/core.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlsched.core.job import Job
from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.sim.physics import Physics

# The plain start and finish: without ground-truth models a start or finish moves no other job's
# finish, so only the started job's finish is scheduled and a finish asks the physics nothing
# (False: every start and finish takes the modelled path, the general path
# dlsched.sim.reference.reference_paths() compares against).
INLINE_START = True


class SimulatedBackend:
    """Schedules finish (and failure) events for the engine's heap through two callables:
    ``moved(job, now)`` — ``job``'s finish time is (again) now + remaining / speed — and
    ``failure_due(time, job, reason)``. ``plain``: starts and finishes skip the physics."""

    __slots__ = ("failure_due", "moved", "physics", "plain", "postponed", "started")

    def __init__(self, physics: Physics, moved: Callable[[Job, float], None],
                 failure_due: Callable[[float, Job, str], None],
                 plain_start: Callable[[Start, float], None] | None = None) -> None:
        self.physics = physics
        self.moved = moved
        self.failure_due = failure_due
        self.postponed: Callable[[Postpone, float], None] | None = None
        self.plain = INLINE_START and physics.plain
        if self.plain:
            # the engine's own closure when it gives one (``moved`` for the started job, without
            # the extra call: this runs once per started job)
            self.started = plain_start if plain_start is not None else self._start_plain
        else:
            self.started = self._start_modelled

    def _start_plain(self, decision: Start, now: float) -> None:
        self.moved(decision[0], now)

    def _start_modelled(self, decision: Start, now: float) -> None:
        moved = self.moved
        for job in self.physics.started(decision[0], now):
            moved(job, now)
        self._arm_failures()

    def preempted(self, decision: Preempt, moved: Iterable[Job], now: float) -> None:
        push = self.moved
        for job in self.physics.preempted(decision[0], now):
            push(job, now)
        self._arm_failures()

    def _arm_failures(self) -> None:
        due = self.physics.failures_due
        if due:
            for t1, job, reason in due:
                self.failure_due(t1, job, reason)
            due.clear()
