"""The one decision dispatcher: a policy's pass over a VC, its decisions carried out as kernel
transitions and reported to the backend that drives the kernel.

Every driver decides through :class:`Decider` — the simulator's event loop
(``sim/engine.py``), the live service (through :class:`dlsched.kernel.entry.Kernel`), the ETA
forecast (``sim/forecast.py``, the engine on a twin) and the queue manager's borrowing and reclaim rounds
(``kernel/quotas.py``: :meth:`Decider.pass_over`, :meth:`Decider.reclaim`,
:meth:`Decider.start_borrowed`, reported to the same backend as every pass).
``grep -n "is Start" src/dlsched`` finds the one place a decision's type is looked at:
:meth:`Decider._passes`.

What a transition *means* differs per backend, and that difference is all a backend supplies
(:class:`Backend`): the simulator turns a start into a finish event (its physics: speed and
failure models decide when), the live service turns it into a nomination that a bind confirms
(``assume=True``: the job holds its GPUs but is not running until the bind succeeds), the
action log of :class:`~dlsched.kernel.entry.Kernel` into a typed :class:`Bind` action.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Protocol

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone, Preempt, Start
from dlsched.kernel.state import ClusterState, StateError, VcState
from dlsched.kernel.view import SchedulingView


class Backend(Protocol):
    """What a driver does after each carried-out decision. ``postponed`` may be None (nothing to do)."""

    def started(self, decision: Start, now: float) -> None:
        """``decision.job`` now holds ``decision.placement`` (running, or assumed when the
        decider assumes)."""

    def preempted(self, decision: Preempt, moved: Iterable[Job], now: float) -> None:
        """``decision.job`` was stopped and queues again (what the stop did to the jobs' truth is
        the backend's physics; ``moved`` is always empty: the kernel keeps none). When the
        decider assumes (live), nothing was stopped yet: the backend is asked to evict."""

    postponed: object   # Callable[[Postpone, float], None] | None


class Decider:
    """Runs policy passes on one kernel state and carries out what they decide.

    ``dirty`` (VCs that saw a change, in the order they did) and ``woken`` (VCs whose policy asked
    for a pass with ``view.wake_at``) are filled by the driver; :meth:`decide` runs one pass per
    dirty VC that has work, in that order, and leaves the policy's wake-up requests in
    ``wakeups`` for the driver's clock.
    """

    __slots__ = ("assume", "backend", "check", "decide", "dirty", "policy", "state", "view", "woken")

    def __init__(self, state: ClusterState, view: SchedulingView, policy, backend: Backend,
                 assume: bool = False, check: bool = False) -> None:
        self.state = state
        self.view = view
        self.policy = policy
        self.backend = backend
        self.assume = assume          # live: a start is a nomination until its bind succeeds
        self.dirty: dict[VcState, None] = {}
        self.woken: set[VcState] = set()
        self.check = check            # check the kernel's invariants after every pass
        # decide(now): one scheduling pass per changed VC that has something to decide, in the
        # order they changed; then the marks are cleared. The pass function both drivers run.
        self.decide: Callable[[float], None] = self._passes(backend, None)

    @property
    def wakeups(self) -> list[tuple[float, int]]:
        """(time, VC index) passes the policy asked for since the driver last cleared this list."""
        return self.view._wakeups

    def run_pass(self, vc: VcState, now: float) -> None:
        """The policy's pass over ``vc`` alone (when it has something to decide)."""
        self._passes(self.backend, (vc,))(now)

    def collect_pass(self, vc: VcState, now: float) -> list[Job]:
        """The policy's pass over ``vc`` with its outcome returned instead of reported: the jobs
        whose finish moved, in order (a failure model's due failures stay in the physics'
        ``failures_due`` for the caller). Benchmarks time a pass with it without a driver."""
        collect = self._collector()
        self._passes(collect, (vc,))(now)
        return collect.moved

    def pass_over(self, vc: VcState, now: float) -> bool:
        """The policy's pass over ``vc`` alone, reported to the backend like every pass; whether
        it started anything. The queue manager's rounds (``kernel/quotas.py``) use it: they need
        to know whether a pass started a job before deciding what else to do."""
        before = self.state.starts
        self._passes(self.backend, (vc,))(now)
        return self.state.starts != before

    def reclaim(self, job: Job, now: float, reason: str, for_job: Job | None) -> None:
        """Preempt ``job`` outside a policy pass (the queue manager taking lent GPUs back for
        ``for_job``), carried out as a pass's Preempt is: stopped now when the decider does not
        assume (the simulator), else only asked for (live: an Evict action; the job keeps its
        GPUs until the driver reports it gone)."""
        if not self.assume:
            self.state.preempt(job, now)
        self.backend.preempted(Preempt(job, reason, for_job), (), now)

    def start_borrowed(self, job: Job, host: VcState, placement, now: float) -> None:
        """Start ``job`` on GPUs ``host`` lends (:meth:`ClusterState.start_borrowed`), reported to
        the backend as a pass's Start is (live: an assumed start, a Bind action on the lender's
        node, confirmed by its bind)."""
        self.state.start_borrowed(job, host, placement, now, confirm=not self.assume)
        self.backend.started(Start(job, placement), now)

    def _collector(self) -> Collect:
        # the driver's physics, when its backend has one (the simulator's), rates what moved
        return Collect(self.state, getattr(self.backend, "physics", None))

    def _passes(self, backend: Backend, only: tuple[VcState, ...] | None) -> Callable[[float], None]:
        """THE decision dispatcher, as a closure over what it needs (built once per driver: it
        is the simulator's hottest path, run once per instant, so nothing is looked up per
        call). For each VC with work (``only``, or the dirty ones, cleared afterwards), the
        policy's pass; each decision it yields becomes a kernel transition, then ``backend``
        hears of it -- before the policy yields the next one, so the view reflects it."""
        st = self.state
        view = self.view
        dirty = self.dirty
        woken = self.woken
        schedule = self.policy.schedule
        started = backend.started
        start = st.start
        confirm = not self.assume
        check = self.check
        vcs = dirty if only is None else only

        def passes(now: float) -> None:
            for vc in vcs:
                if not vc.pending and vc not in woken:  # nothing pending, no wake-up: nothing to decide
                    continue
                for decision in schedule(view, vc):  # the kernel rejects placements outside the job's VC
                    kind = type(decision)
                    if kind is Start:
                        start(decision[0], decision[1], now, decision[2], confirm)
                        started(decision, now)
                    elif kind is Preempt:
                        if confirm:  # the backend's physics books what the stop did
                            st.preempt(decision[0], now)
                        # live (assumed): the backend asks for the eviction; the job keeps its
                        # GPUs until its pod is gone, when the driver reports the stop
                        backend.preempted(decision, (), now)
                    elif kind is Postpone:
                        st.postponed += 1
                        if backend.postponed is not None:
                            backend.postponed(decision, now)
                    else:
                        raise StateError(f"unknown decision {decision!r}")
                if check:
                    st.check_invariants()
            if only is None:
                dirty.clear()
                if woken:
                    woken.clear()

        return passes


class _Scripted:
    """A stand-in policy whose one pass yields given decisions (:func:`apply`)."""

    name = "scripted"

    def __init__(self, decisions: Iterable[Decision]) -> None:
        self.decisions = list(decisions)

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterable[Decision]:
        decisions, self.decisions = self.decisions, []
        return decisions


class Collect:
    """A backend that lists the jobs whose finish moved (tests and tools that apply decisions by
    hand, the queue manager's rounds). With a ``physics`` (the simulated driver's ground truth,
    :class:`dlsched.sim.physics.Physics`), it rates a started job and its co-runners, and books a
    preempted job's work and overhead; without one, a start moves only the started job."""

    __slots__ = ("moved", "physics", "postponed", "state")

    def __init__(self, state: ClusterState, physics=None) -> None:
        self.state = state
        self.physics = physics
        self.moved: list[Job] = []
        self.postponed = None

    def started(self, decision: Start, now: float) -> None:
        if self.physics is None:
            self.moved.append(decision[0])
        else:
            self.moved.extend(self.physics.started(decision[0], now))

    def preempted(self, decision: Preempt, moved: Iterable[Job], now: float) -> None:
        self.moved.extend(moved)
        if self.physics is not None:
            self.moved.extend(self.physics.preempted(decision[0], now))


def apply(state: ClusterState, decision: Decision, now: float, physics=None) -> list[Job]:
    """Carry out one decision on ``state`` through the dispatcher (tests and tools that decide by
    hand); returns the running jobs whose finish time changed (for a start: the job itself first,
    then, with a ``physics`` that has a speed model, co-runners whose speed changed)."""
    backend = Collect(state, physics)
    decider = Decider(state, SchedulingView(state, oracle=False), _Scripted([decision]), backend)
    vc = decision[0].vc_state
    decider.woken.add(vc)   # a pass even when nothing is pending (a preemption of a running job)
    decider.run_pass(vc, now)
    return backend.moved


__all__ = ["Backend", "Collect", "Decider", "Postpone", "apply"]
