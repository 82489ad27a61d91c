"""The kernel's entry point: typed stimuli in, typed actions out.

:class:`Kernel` owns one :class:`~dlsched.kernel.state.ClusterState`, the policy's
:class:`~dlsched.kernel.view.SchedulingView` and the one dispatcher
(:class:`~dlsched.kernel.decide.Decider`). :meth:`Kernel.handle` applies the transition a stimulus
means, marks the VC that changed, and on :class:`PassRequested` or :class:`TimerFired` decides:
the policy's decisions come back as :class:`Bind` / :class:`Evict` / :class:`Postponed` actions
and its wake-up requests as :class:`Timer` actions keyed ``("vc", vid)``.

The live service (``service/adapter.py``) and ``replay`` of a recorded log drive the kernel through
here. The simulator's event loop calls the same transitions and the same
:attr:`Decider.decide` directly, without allocating a stimulus per event (it handles millions);
``tests/test_kernel_entry.py`` checks that a simulation fed through :meth:`handle` makes the same
decisions.

With ``assume=True`` (live) a :class:`Bind` is a nomination — the job holds its GPUs but does not
run until :class:`BindSucceeded` — and an :class:`Evict` is a request: the job keeps its GPUs
until the driver reports :class:`JobEvicted`. With ``assume=False`` both are already carried out
when they are returned.

Queues that borrow: with a :class:`~dlsched.kernel.quotas.QuotaManager` installed (the books),
each pass that decided something is followed by the driver's ``rebalance`` function (the
decisions: ``dlsched.sched.actions.rebalance``, given to the constructor because the kernel does
not import ``sched``), as in the simulator after an instant's passes. A borrowed start comes out as a :class:`Bind` on the
lender's node (the loan is booked at once and released by :class:`BindFailed` or a
withdrawal), a reclaim as :class:`Evict` actions whose ``for_job`` is the lender's blocked head;
live, the lender's head starts at the pass after the last :class:`JobEvicted`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from dlsched.core.cluster import GpuType, NodeSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.decide import Decider
from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.kernel.limits import over_limit
from dlsched.kernel.quotas import QuotaManager, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import (
    LIMIT_TIMER,
    TIME_LIMIT_REASON,
    VC_TIMER,
    Action,
    Bind,
    BindFailed,
    BindSucceeded,
    Evict,
    GpuTypeChanged,
    JobAdopted,
    JobEvicted,
    JobFailed,
    JobFinished,
    JobSubmitted,
    JobTimedOut,
    JobWithdrawn,
    NodeChanged,
    PassRequested,
    Postponed,
    PowerChanged,
    PredictionCorrected,
    QueuesChanged,
    Stimulus,
    Timer,
    TimerFired,
    TimerKey,
)
from dlsched.kernel.stop import StopReason
from dlsched.kernel.view import SchedulingView

_RUNNING = JobState.RUNNING

Rebalance = Callable[[QuotaManager, Decider, float], None]
"""The queues' cycle action after a pass (``dlsched.sched.actions.rebalance``): borrow and reclaim."""


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
    """Stimuli in, actions out, on one state with one policy: the one place that maps what
    happened to kernel transitions. Each stimulus has a public handler (``on_submitted`` ...
    ``on_timer``) that every driver calls: the live service and replay through :meth:`handle`
    (one dispatch over the same handlers), the simulator directly (no stimulus objects on its
    hot path). A handler applies the transition and marks the VC that changed; the pass runs on
    :class:`PassRequested` / :class:`TimerFired` (``handle``) or when the simulator's instant ends.

    The driver builds the view when the policy's plug-ins declare indexes
    (``sched.indexes.attach_plugins``, as the simulator and the service do). ``backend``: what
    hears of carried-out decisions (default: an :class:`ActionLog`, whose actions ``handle``
    returns; the simulator gives its :class:`~dlsched.sim.backend.SimulatedBackend`). The
    policy's hooks (``job_submitted``, ``job_finished``) are read once, here; ``hooks=False``
    leaves them out (a forecast: the policy must not learn from predicted ends). ``rebalance``:
    the borrowing and reclaim decisions run after a pass when queues are installed
    (``dlsched.sched.actions.rebalance``; installing queues without it is a :class:`StateError`)."""

    def __init__(self, state: ClusterState, policy, assume: bool = True, oracle: bool = False,
                 view: SchedulingView | None = None, quotas: QuotaManager | None = None,
                 backend=None, check: bool = False, hooks: bool = True,
                 rebalance: Rebalance | None = None) -> None:
        self.state = state
        self.policy = policy
        self.rebalance = rebalance   # the decisions on the queues' books after a pass
        if quotas is not None and rebalance is None:
            self._need_rebalance()
        self.quotas = quotas   # the books of borrowing and reclaim between VCs (None: fixed VCs)
        self._queue_specs: tuple = ()   # what use_queues was given (a new VC rebuilds the manager)
        self.queues_refused = ""        # why the last QueuesChanged was not enforced ('' when it was)
        self.view = view if view is not None else SchedulingView(state, oracle)
        self.log = ActionLog()
        self.decider = Decider(state, self.view, policy, self.log if backend is None else backend,
                               assume=assume, check=check)
        # what the hottest handlers use, bound once (the simulator calls them per event), and
        # without the policy-hook test where the policy has no hook (PolicyBase's None)
        self._dirty = self.decider.dirty
        self._submit, self._finish = state.submit, state.finish
        self._job_submitted, self._job_finished = policy.job_submitted, policy.job_finished
        if not hooks:
            self._job_submitted = self._job_finished = None
        if self._job_submitted is None:
            self.on_submitted = self._submitted_unhooked
        if self._job_finished is None:
            self.on_finished, self.on_finish_due = self._finished_unhooked, self._finish_due_unhooked
        self._handlers = {
            JobSubmitted: self.on_submitted, PassRequested: self.on_pass, BindSucceeded: self.on_bound,
            BindFailed: self.on_bind_failed, JobFinished: self.on_finished, JobFailed: self.on_failed,
            JobEvicted: self.on_evicted, JobWithdrawn: self.on_withdrawn,
            PredictionCorrected: self.on_corrected, NodeChanged: self.on_node, GpuTypeChanged: self.on_gpu_type,
            PowerChanged: self.on_power,
            TimerFired: self._timer_then_pass, JobAdopted: self.on_adopted, QueuesChanged: self.on_queues,
            JobTimedOut: self.on_timed_out,
        }
        self.assume = assume

    def prepare(self) -> None:
        """Let the policy see the view once before the first stimulus (its ``prepare`` hook)."""
        self.policy.prepare(self.view)

    def handle(self, stimulus: Stimulus, now: float) -> list[Action]:
        """Apply ``stimulus`` at ``now`` through its handler (called with the stimulus' fields,
        then ``now``); returns the actions the driver must carry out."""
        handler = self._handlers.get(type(stimulus))
        if handler is None:
            raise StateError(f"unknown stimulus {stimulus!r}")
        self.view.now = now
        handler(*stimulus, now)
        actions = self.log.actions
        if not actions:
            return []
        self.log.actions = []
        return actions

    def mark(self, vid: int) -> None:
        """VC ``vid`` changed: the next pass decides it."""
        self._dirty[self.state.vcs[vid]] = None

    @property
    def pending_pass(self) -> bool:
        """Whether some VC changed since the last pass."""
        return bool(self._dirty)

    def install_quotas(self, quotas: QuotaManager | None) -> QuotaManager | None:
        """Use ``quotas`` from the next pass on (None: no borrowing); the live service installs a
        new manager when its queue configuration changes. Returns the one it replaces, which no
        longer observes the state. StateError when the kernel was given no ``rebalance``: the
        books without the decisions would borrow nothing, silently."""
        if quotas is not None:
            self._need_rebalance()
        old, self.quotas = self.quotas, quotas
        if old is not None and old is not quotas:
            self.state.remove_observer(old)
        return old

    def _need_rebalance(self) -> None:
        if self.rebalance is None:
            raise StateError("queues that borrow are installed, but the kernel was given no rebalance "
                             "(Kernel(rebalance=dlsched.sched.actions.rebalance))")

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
        self._need_rebalance()
        try:
            manager = QuotaManager(self._queue_specs, self.state, strict=False)
        except ValueError:
            self.install_quotas(None)
            raise
        manager.rebuild(now, self.install_quotas(manager))
        for vc in self.state.vcs:
            self._dirty[vc] = None
        return manager

    # -- the handlers: one per stimulus, called with its fields and then ``now`` --------------
    def on_queues(self, specs: tuple, now: float) -> None:
        """``QueuesChanged``: enforce ``specs`` from now on (:meth:`use_queues`). Specs that do
        not fit the state (a VC named as a parent) are not enforced: no queue borrows, and
        :attr:`queues_refused` says why ('' when they are), for the driver to report; a replay
        of the stimulus ends in the same place."""
        try:
            self.use_queues(specs, now)
        except ValueError as exc:
            self.queues_refused = f"queues: {exc}"
        else:
            self.queues_refused = ""

    def on_submitted(self, job: Job, now: float) -> None:
        """A new job queues in its VC (the policy's ``job_submitted`` hook first: it may set the
        job's key)."""
        self._job_submitted(job, now)
        self._dirty[self._submit(job, now)] = None

    def _submitted_unhooked(self, job: Job, now: float) -> None:
        self._dirty[self._submit(job, now)] = None

    def on_pass(self, now: float) -> None:
        """Decide every VC that changed; then the queues' borrowing and reclaim (after an
        instant that changed something, as the simulator); the policy's wake-up requests come
        back as :class:`Timer` actions keyed ``("vc", vid)``."""
        decider = self.decider
        changed = bool(decider.dirty)
        decider.decide(now)
        if changed and self.quotas is not None:
            self.rebalance(self.quotas, decider, now)
        wakeups = self.view._wakeups
        if wakeups:
            self.log.actions.extend(Timer(t, (VC_TIMER, vid)) for t, vid in wakeups)
            wakeups.clear()

    def on_timer(self, key: TimerKey, now: float) -> None:
        """A :class:`Timer` came due. ``("vc", vid)``: that VC gets a pass even with nothing new
        (the policy asked for it). ``("limit", job_id)``: the job has run its max runtime
        (``Job.time_limit_s``, counted in run time: :func:`~dlsched.kernel.limits.run_time`) and is killed
        (:attr:`StopReason.TIME_LIMIT`); a limit timer that outlived its run (the job stopped,
        or restarted with time left) changes nothing. Live (``assume=True``) the job still runs
        on its node, so it is not killed here: an :class:`Evict` with reason ``"time limit"``
        asks the driver to stop it (the eviction path), which reports :class:`JobTimedOut`."""
        kind, ident = key
        if kind == VC_TIMER:
            vc = self.state.vcs[ident]
            self._dirty[vc] = None
            self.decider.woken.add(vc)
        elif kind == LIMIT_TIMER:
            job = self.state.jobs.get(ident)
            if job is not None and job.state is JobState.RUNNING and over_limit(job, now):
                if self.assume:
                    self.log.actions.append(Evict(job, TIME_LIMIT_REASON))
                else:
                    self.on_timed_out(job, now)
        else:
            raise StateError(f"unknown timer {key!r}")

    def on_timed_out(self, job: Job, now: float) -> None:
        """The job was stopped at its max runtime (the simulator: its limit timer; live: its pod
        failed ``DeadlineExceeded`` or dlsched's eviction at the limit is done): it ends for good
        (:attr:`StopReason.TIME_LIMIT`), then the policy's ``job_finished`` hook."""
        self.state.terminate(job, now, StopReason.TIME_LIMIT)
        self._dirty[job.vc_state] = None
        if self._job_finished is not None:
            self._job_finished(job, now)

    def _timer_then_pass(self, key: TimerKey, now: float) -> None:
        self.on_timer(key, now)
        self.on_pass(now)

    def on_adopted(self, job: Job, placement, borrowed: bool, ran_s: float, now: float) -> None:
        """``JobAdopted``: a running job this kernel did not place, booked as it stands. A node
        cordoned after the job was bound there still runs it: opened for the booking and closed
        again. The ``ran_s`` seconds it ran before it was found are attained service (before the
        start, so that the limit clock arms its timer for the run time left)."""
        st = self.state
        if ran_s > 0.0:
            job.attained += job.gpus * ran_s
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
        self._dirty[host] = None

    def on_bound(self, job: Job, now: float) -> None:
        """The driver carried out a :class:`Bind` (live: the pod is bound): the job runs."""
        self.state.confirm(job, now)

    def on_bind_failed(self, job: Job, reason: str, now: float) -> None:
        """A :class:`Bind` could not be carried out: the job gives its GPUs back and waits."""
        self._dirty[self.state.forget(job, now)] = None

    def on_finished(self, job: Job, now: float) -> None:
        """The job completed (the policy's ``job_finished`` hook after the transition)."""
        self._dirty[self._finish(job, now)] = None
        self._job_finished(job, now)

    def _finished_unhooked(self, job: Job, now: float) -> None:
        self._dirty[self._finish(job, now)] = None

    def on_finish_due(self, job: Job, epoch: int, now: float) -> None:
        """A finish the driver scheduled (the simulator's event, pushed with the job's ``epoch``
        at its start or last change of speed): :meth:`on_finished`, unless it went stale (the job
        stopped or changed speed since, so its epoch moved)."""
        if epoch == job.epoch and job.state is _RUNNING:
            self._dirty[self._finish(job, now)] = None
            self._job_finished(job, now)

    def _finish_due_unhooked(self, job: Job, epoch: int, now: float) -> None:
        if epoch == job.epoch and job.state is _RUNNING:
            self._dirty[self._finish(job, now)] = None

    def on_failed(self, job: Job, reason: str, now: float) -> None:
        """The job crashed; it queues again with the attempt counted (then the policy's hook)."""
        self.state.fail(job, now, reason)
        self._dirty[job.vc_state] = None
        if self.policy.job_failed is not None:
            self.policy.job_failed(job, now, reason)

    def on_evicted(self, job: Job, now: float) -> None:
        """An :class:`Evict` was carried out: the job queues again with its attained service; a
        reclaimed loan's lender may start its head now."""
        host = self.state.hosts.get(job)
        self.state.preempt(job, now)
        self._dirty[job.vc_state] = None
        if host is not None:
            self._dirty[host] = None

    def on_withdrawn(self, job: Job, reason: str, now: float) -> None:
        """The job left before it finished (an assumed start is undone first)."""
        if job.state is JobState.ASSUMED:
            self._dirty[self.state.forget(job, now)] = None
        self.state.withdraw(job, now)

    def on_corrected(self, job: Job, now: float) -> None:
        """The job's predictions changed: its VC is decided again."""
        self.state.predictions_changed(job)
        if job.vc_state is not None:
            self._dirty[job.vc_state] = None

    def on_node(self, change: str, node: int, spec: NodeSpec | None, now: float) -> None:
        """A node was added (``spec``), removed, cordoned or uncordoned (``NODE_CHANGES``)."""
        st = self.state
        if change == "added":
            if spec is None:
                raise StateError("a node added without its spec")
            known = len(st.vcs)
            node = st.add_node(spec, now)
            if len(st.vcs) != known and self.quotas is not None and self._queue_specs:
                self.use_queues(self._queue_specs, now)   # the manager knows the VCs it was built with
        elif change == "removed":
            st.remove_node(node, now)
        elif change == "cordoned":
            st.cordon(node, now)
        elif change == "uncordoned":
            st.uncordon(node, now)
        else:
            raise StateError(f"unknown node change {change!r}")
        self._dirty[st.vcs[st.node_vc[node]]] = None

    def on_gpu_type(self, node: int, gpu_type: GpuType, now: float) -> None:
        """``GpuTypeChanged``: the node's GPUs are of ``gpu_type`` from now on, busy or not
        (:meth:`ClusterState.set_gpu_type`); its VC is decided again (more memory may let a
        waiting job share a GPU there)."""
        st = self.state
        st.set_gpu_type(node, gpu_type, now)
        self._dirty[st.vcs[st.node_vc[node]]] = None

    def on_power(self, node: int, on: bool, now: float) -> None:
        """A node was powered on or off."""
        st = self.state
        (st.power_on if on else st.power_off)(node, now)
        self._dirty[st.vcs[st.node_vc[node]]] = None

