"""The simulated backend: what a carried-out decision means in a simulation.

The kernel's dispatcher (:class:`dlsched.kernel.decide.Decider`) carries out a decision as a
transition and then tells the backend. Here a start becomes a finish event: with no ground-truth
models the job runs its remaining solo time; with a speed or failure model the job is rated (and
its co-runners re-rated) and a failure may be scheduled. The live service's backend turns the same
start into a nomination instead (``service/core.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlsched.core.job import Job
from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.kernel.state import ClusterState

# The plain start: without ground-truth models a start moves no other job's finish, so only the
# started job's finish is scheduled (False: every start takes the modelled path, the general path
# dlsched.sim.reference.reference_paths() compares against).
INLINE_START = True


class SimulatedBackend:
    """Schedules finish (and failure) events for the engine's heap through two callables:
    ``moved(job, now)`` — ``job``'s finish time is (again) now + remaining / speed — and
    ``failure_due(time, job, reason)``."""

    __slots__ = ("state", "moved", "failure_due", "started", "postponed")

    def __init__(self, state: ClusterState, moved: Callable[[Job, float], None],
                 failure_due: Callable[[float, Job, str], None],
                 plain_start: Callable[[Start, float], None] | None = None) -> None:
        self.state = state
        self.moved = moved
        self.failure_due = failure_due
        self.postponed: Callable[[Postpone, float], None] | None = None
        plain = INLINE_START and state._speed_model is None and state.failure_model is None
        if plain:
            # the engine's own closure when it gives one (``moved`` for the started job, without
            # the extra call: this runs once per started job)
            self.started = plain_start if plain_start is not None else self._start_plain
        else:
            self.started = self._start_modelled

    def _start_plain(self, decision: Start, now: float) -> None:
        self.moved(decision[0], now)

    def _start_modelled(self, decision: Start, now: float) -> None:
        st = self.state
        moved = self.moved
        for job in st._modelled_start(decision[0], now):
            moved(job, now)
        due = st.failures_due
        if due:
            for t1, job, reason in due:
                self.failure_due(t1, job, reason)
            due.clear()

    def preempted(self, decision: Preempt, moved: Iterable[Job], now: float) -> None:
        push = self.moved
        for job in moved:
            push(job, now)
        due = self.state.failures_due
        if due:
            for t1, job, reason in due:
                self.failure_due(t1, job, reason)
            due.clear()
