"""The kernel's entry point: typed stimuli in, typed actions out.

:class:`Kernel` owns one :class:`~dlsched.kernel.state.ClusterState`, the policy's
:class:`~dlsched.kernel.view.SchedulingView` and the one dispatcher
(:class:`~dlsched.kernel.decide.Decider`). :meth:`Kernel.handle` applies the transition a stimulus
means, marks the VC that changed, and on :class:`PassRequested` or :class:`TimerFired` decides:
the policy's decisions come back as :class:`Bind` / :class:`Evict` / :class:`Postponed` actions
and its wake-up requests as :class:`WakeAt`.

The live service (``service/adapter.py``) and ``replay`` of a recorded log drive the kernel through
here. The simulator's event loop calls the same transitions and the same
:attr:`Decider.decide` directly, without allocating a stimulus per event (it handles millions);
``tests/test_kernel_entry.py`` checks that a simulation fed through :meth:`handle` makes the same
decisions.

With ``assume=True`` (live) a :class:`Bind` is a nomination — the job holds its GPUs but does not
run until :class:`BindSucceeded` — and an :class:`Evict` is a request: the job keeps its GPUs
until the driver reports :class:`JobEvicted`. With ``assume=False`` both are already carried out
when they are returned.

Queues that borrow (``kernel/quotas.py``): with a :class:`~dlsched.kernel.quotas.QuotaManager`
installed, each pass that decided something is followed by its ``rebalance``, as in the
simulator after an instant's passes. A borrowed start comes out as a :class:`Bind` on the
lender's node (the loan is booked at once and released by :class:`BindFailed` or a
withdrawal), a reclaim as :class:`Evict` actions whose ``for_job`` is the lender's blocked head;
live, the lender's head starts at the pass after the last :class:`JobEvicted`.
"""

from __future__ import annotations

from collections.abc import Iterable

from dlsched.core.job import Job, JobState
from dlsched.kernel.decide import Decider
from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.kernel.quotas import QuotaManager, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import (
    Action,
    Bind,
    BindFailed,
    BindSucceeded,
    Evict,
    JobAdopted,
    JobEvicted,
    JobFailed,
    JobFinished,
    JobSubmitted,
    JobWithdrawn,
    NodeChanged,
    PassRequested,
    Postponed,
    PowerChanged,
    PredictionCorrected,
    Stimulus,
    TimerFired,
    WakeAt,
)
from dlsched.kernel.view import SchedulingView


class ActionLog:
    """The dispatcher's backend for :class:`Kernel`: every carried-out decision becomes an action."""

    __slots__ = ("actions",)

    def __init__(self) -> None:
        self.actions: list[Action] = []

    def started(self, decision: Start, now: float) -> None:
        self.actions.append(Bind(decision[0], decision[1], decision[2]))

    def preempted(self, decision: Preempt, moved: Iterable[Job], now: float) -> None:
        reason = decision[1] or "preempted by the policy"  # the policy's why, and for whom
        for_job = decision[2]
        self.actions.append(Evict(decision[0], reason if for_job is None else f"{reason}; for job {for_job.job_id}",
                                  for_job))

    def postponed(self, decision: Postpone, now: float) -> None:
        self.actions.append(Postponed(decision[0], decision[1]))


class Kernel:
    """Stimuli in, actions out, on one state with one policy. The driver builds the view when
    the policy's plug-ins declare indexes (``sched.indexes.make_view``: attaching them is the
    driver's job, as the simulator and the service do)."""

    def __init__(self, state: ClusterState, policy, assume: bool = True, oracle: bool = False,
                 view: SchedulingView | None = None, quotas: QuotaManager | None = None) -> None:
        self.state = state
        self.policy = policy
        self.quotas = quotas   # borrowing and reclaim between VCs after each pass (None: fixed VCs)
        self._queue_specs: tuple = ()   # what use_queues was given (a new VC rebuilds the manager)
        self.view = view if view is not None else SchedulingView(state, oracle)
        self.log = ActionLog()
        self.decider = Decider(state, self.view, policy, self.log, assume=assume)
        self._handlers = {
            JobSubmitted: self._submitted, PassRequested: self._pass, BindSucceeded: self._bound,
            BindFailed: self._bind_failed, JobFinished: self._finished, JobFailed: self._failed,
            JobEvicted: self._evicted, JobWithdrawn: self._withdrawn,
            PredictionCorrected: self._corrected, NodeChanged: self._node, PowerChanged: self._power,
            TimerFired: self._timer, JobAdopted: lambda s, now: self.on_adopted(*s, now),
        }

    def prepare(self) -> None:
        """Let the policy see the view once before the first stimulus (its ``prepare`` hook)."""
        self.policy.prepare(self.view)

    def handle(self, stimulus: Stimulus, now: float) -> list[Action]:
        """Apply ``stimulus`` at ``now``; returns the actions the driver must carry out."""
        handler = self._handlers.get(type(stimulus))
        if handler is None:
            raise StateError(f"unknown stimulus {stimulus!r}")
        self.view.now = now
        handler(stimulus, now)
        actions = self.log.actions
        if not actions:
            return []
        self.log.actions = []
        return actions

    def mark(self, vid: int) -> None:
        """VC ``vid`` changed: the next pass decides it."""
        self.decider.dirty[self.state.vcs[vid]] = None

    @property
    def pending_pass(self) -> bool:
        """Whether some VC changed since the last pass."""
        return bool(self.decider.dirty)

    # -- one handler per stimulus ------------------------------------------------------------
    def _submitted(self, s: JobSubmitted, now: float) -> None:
        if self.policy.job_submitted is not None:
            self.policy.job_submitted(s.job, now)  # before queueing: the policy may set the job's key
        self.decider.dirty[self.state.submit(s.job, now)] = None

    def install_quotas(self, quotas: QuotaManager | None) -> QuotaManager | None:
        """Use ``quotas`` from the next pass on (None: no borrowing); the live service installs a
        new manager when its queue configuration changes. Returns the one it replaces, which no
        longer observes the state."""
        old, self.quotas = self.quotas, quotas
        if old is not None and old is not quotas:
            self.state.remove_observer(old)
        return old

    def use_queues(self, specs, now: float) -> QuotaManager | None:
        """Enforce the queues ``specs`` on the state as it is (the live service, a replay of its
        log): when some queue may borrow, a new manager replaces the current one, with what runs
        booked (:meth:`QuotaManager.rebuild`: loans re-derived from what runs where, decayed usage
        and evictions in flight carried over) and every VC decided again at the next pass; else
        none. Queues whose VC has no node yet are allowed; when a VC's first node joins
        (``NodeChanged``), the manager is rebuilt. ValueError when the specs do not fit the
        state (a VC named as a parent)."""
        self._queue_specs = tuple(specs)
        if not self._queue_specs or not borrowing_possible(self._queue_specs):
            self.install_quotas(None)
            return None
        try:
            manager = QuotaManager(self._queue_specs, self.state, strict=False)
        except ValueError:
            self.install_quotas(None)
            raise
        manager.rebuild(now, self.install_quotas(manager))
        for vc in self.state.vcs:
            self.decider.dirty[vc] = None
        return manager

    def _pass(self, s: PassRequested, now: float) -> None:
        decider = self.decider
        changed = bool(decider.dirty)   # as the simulator: a rebalance after an instant that changed something
        decider.decide(now)
        if changed and self.quotas is not None:
            self.quotas.rebalance(decider, now)
        wakeups = self.view._wakeups
        if wakeups:
            self.log.actions.extend(WakeAt(t, vid) for t, vid in wakeups)
            wakeups.clear()

    def _timer(self, s: TimerFired, now: float) -> None:
        vc = self.state.vcs[s.vid]
        self.decider.dirty[vc] = None
        self.decider.woken.add(vc)
        self._pass(PassRequested(), now)

    def on_adopted(self, job: Job, placement, borrowed: bool, now: float) -> None:
        """``JobAdopted``: a running job this kernel did not place, booked as it stands. A node
        cordoned after the job was bound there still runs it: opened for the booking and closed
        again."""
        st = self.state
        host = st.vcs[st.node_vc[placement[0][0]]]
        closed = [n for n, _ in placement if st.node_cordoned[n]]
        for n in closed:
            st.uncordon(n, now)
        try:
            if borrowed:
                if self.quotas is None:
                    raise StateError(f"job {job.job_id} adopted as a loan, but no queues borrow")
                st.start_borrowed(job, host, placement, now)
                self.quotas.adopt(job)
            else:
                shared = any(st.node_mask[n] & mask for n, mask in placement)
                st.start(job, placement, now, shared=shared, confirm=True)
        finally:
            for n in closed:
                st.cordon(n, now)
        self.decider.dirty[host] = None

    def _bound(self, s: BindSucceeded, now: float) -> None:
        self.state.confirm(s.job, now)

    def _bind_failed(self, s: BindFailed, now: float) -> None:
        self.decider.dirty[self.state.forget(s.job, now)] = None

    def _finished(self, s: JobFinished, now: float) -> None:
        self.state.finish(s.job, now)
        self.decider.dirty[s.job.vc_state] = None
        if self.policy.job_finished is not None:
            self.policy.job_finished(s.job, now)

    def _failed(self, s: JobFailed, now: float) -> None:
        self.state.fail(s.job, now, s.reason)
        self.decider.dirty[s.job.vc_state] = None
        if self.policy.job_failed is not None:
            self.policy.job_failed(s.job, now, s.reason)

    def _evicted(self, s: JobEvicted, now: float) -> None:
        host = self.state.hosts.get(s.job)   # a reclaimed loan: its lender's head may start now
        self.state.preempt(s.job, now)
        self.decider.dirty[s.job.vc_state] = None
        if host is not None:
            self.decider.dirty[host] = None

    def _withdrawn(self, s: JobWithdrawn, now: float) -> None:
        job = s.job
        if job.state is JobState.ASSUMED:
            self.decider.dirty[self.state.forget(job, now)] = None
        self.state.withdraw(job, now)

    def _corrected(self, s: PredictionCorrected, now: float) -> None:
        self.state.predictions_changed(s.job)
        if s.job.vc_state is not None:
            self.decider.dirty[s.job.vc_state] = None

    def _node(self, s: NodeChanged, now: float) -> None:
        st = self.state
        if s.change == "added":
            if s.spec is None:
                raise StateError("a node added without its spec")
            known = len(st.vcs)
            node = st.add_node(s.spec, now)
            if len(st.vcs) != known and self.quotas is not None and self._queue_specs:
                self.use_queues(self._queue_specs, now)   # the manager knows the VCs it was built with
        elif s.change == "removed":
            node = s.node
            st.remove_node(node, now)
        elif s.change == "cordoned":
            node = s.node
            st.cordon(node, now)
        elif s.change == "uncordoned":
            node = s.node
            st.uncordon(node, now)
        else:
            raise StateError(f"unknown node change {s.change!r}")
        self.decider.dirty[st.vcs[st.node_vc[node]]] = None

    def _power(self, s: PowerChanged, now: float) -> None:
        st = self.state
        (st.power_on if s.on else st.power_off)(s.node, now)
        self.decider.dirty[st.vcs[st.node_vc[s.node]]] = None
