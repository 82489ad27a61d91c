"""The event loop of the simulated backend. Time jumps from event to event; nothing ticks.

The loop owns only the clock and the heap: every stimulus goes to the kernel's handler for it
(:class:`~dlsched.kernel.entry.Kernel`: ``on_submitted``, ``on_finished`` / ``on_finish_due``,
``on_failed``, ``on_timer``, called directly -- no stimulus object per event), the one table the
live service and replay drive too, and decisions go through its dispatcher. What a transition
does to the jobs' ground truth (speed, failures, remaining time) is the physics'
(:class:`~dlsched.sim.physics.Physics`), asked after each transition. Metrics are a kernel
observer. Events at the same instant are handled in a fixed order -- job completions and
failures, then max-runtime kills, then node power changes, then arrivals, then timers -- and
afterwards each VC that saw a change gets one scheduling pass. Events sit in one heap as
``(time, priority, sequence, handler, payload, tag)``, each carrying the handler the loop calls
with ``(payload, tag, now)``; arrivals are read from the time-sorted job list with a cursor
instead of being pushed. A finish or failure event that became stale (the job was preempted,
failed or changed speed) is dropped lazily via the job's epoch.
"""
from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from functools import partial
from itertools import repeat
from operator import attrgetter, gt, is_not

import numpy as np

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.limits import LimitClock
from dlsched.kernel.queue_tree import borrowing_blocker
from dlsched.kernel.quotas import QuotaManager, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import VC_TIMER
from dlsched.kernel.stop import StopReason
from dlsched.kernel.view import SchedulingView
from dlsched.metrics.recorder import MetricsRecorder
from dlsched.sched.actions import rebalance
from dlsched.sched.indexes import attach_plugins
from dlsched.sched.protocols import FailureModel, Policy, SpeedModel
from dlsched.sim.backend import SimulatedBackend
from dlsched.sim.config import SimConfig
from dlsched.sim.physics import Physics

_POD_SHAPE = attrgetter("_spec.gpus_per_pod")
_STATE, _JOB_VC, _GPUS, _SUBMIT = attrgetter("state"), attrgetter("_spec.vc"), attrgetter("gpus"), attrgetter("submit_time")
_TOTAL_GPUS = attrgetter("total_gpus")

_LIMIT = attrgetter("_spec.time_limit_s")
_NOT_NONE = partial(is_not, None)


# event priorities at equal times: a finish before a max-runtime kill (a job that completes at its
# limit has completed), then power events; arrivals (read from the job list, not the heap) come
# next, then timers. ``(now, ARRIVAL)`` is below every heap event of ``now`` that comes after them.
FINISH, LIMIT, POWER, ARRIVAL, TIMER, END = 0, 0.5, 1, 2, 3, 9

INF = math.inf
SENTINEL = (INF, END, 0, None, None, 0)   # the heap's last event: nothing is left
_NO_HOOKS = (None, None)   # run_events' arrival and end-of-instant hooks of a run without a power manager
STALL_LIMIT = 30 * 86400.0  # with a power manager: nothing running and jobs waiting this long = stuck


class SimulationError(RuntimeError):
    """The simulation cannot go on (a job that can never fit, a policy decision that is invalid)."""


@dataclass(slots=True)
class SimResult:
    """Jobs with their outcomes plus the recorder's time-weighted levels."""

    jobs: list[Job]
    metrics: MetricsRecorder
    policy: str
    placement: str
    events: int = 0
    extra: dict = field(default_factory=dict)
    stops: dict[str, StopReason] = field(default_factory=dict)   # job id -> why, for jobs ended before completing


class Simulator:
    """Runs one policy over one job list on one cluster, with optional ground-truth models."""

    def __init__(self, cluster: ClusterSpec, policy: Policy, config: SimConfig | None = None,
                 speed_model: SpeedModel | None = None, power_manager=None,
                 failure_model: FailureModel | None = None,
                 observers: Sequence[object] = ()) -> None:
        self.cluster = cluster
        self.policy = policy
        self.config = config or SimConfig()
        self.speed_model = speed_model
        self.failure_model = failure_model
        self.power_manager = power_manager
        self.observers = tuple(observers)  # the caller's own kernel observers (e.g. an experiment's audit)

    def run(self, jobs: list[Job], progress: Callable[[int, int], None] | None = None) -> SimResult:
        """Simulate ``jobs`` (their runtime fields are reset first) and return the outcome."""
        # The loop allocates many short-lived tuples but creates no cyclic garbage: the cyclic
        # collector would only rescan the (large, live) job graph over and over.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(jobs, progress)
        finally:
            if was_enabled:
                gc.enable()

    def _build_state(self) -> tuple[ClusterState, MetricsRecorder]:
        cfg, policy = self.config, self.policy
        state = ClusterState(self.cluster, new_queue=policy.new_queue, max_jobs_per_gpu=cfg.max_jobs_per_gpu)
        rec = MetricsRecorder(state, cfg.timeline_interval)  # registers itself as the state's clock observer
        self.indexes = attach_plugins(state, policy)  # placement observers, and the indexes declared
        for plugin in self.observers:
            attach = getattr(plugin, "attach", None)
            if attach is not None:
                attach(state)
            state.add_observer(plugin)
        return state, rec

    def _check_jobs(self, state: ClusterState, jobs: list[Job]) -> None:
        """Clear the runtime state of jobs that ran before and bind each job to its VC. In C
        (``map``): no bytecode per job unless a job is wrong (then the per-job loop finds the
        first one, for its message)."""
        created = JobState.CREATED
        if not all(map(created.__eq__, map(_STATE, jobs))):
            for job in jobs:
                if job.state is not created:  # it ran before: clear its runtime state (fresh jobs have none)
                    job.reset()
        by_name = {vc.name: vc for vc in state.vcs}
        vcs = list(map(by_name.get, map(_JOB_VC, jobs)))
        if None in vcs or any(map(gt, map(_GPUS, jobs), map(_TOTAL_GPUS, filter(None, vcs)))):
            for job, vc in zip(jobs, vcs):
                if vc is None:
                    raise SimulationError(f"job {job.job_id}: VC {job.vc!r} is not in the cluster "
                                          f"(known: {', '.join(state.vc_index)})")
                if job.gpus > vc.total_gpus:
                    raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs but VC {job.vc!r} has "
                                          f"only {vc.total_gpus}: it could never run")
        list(map(setattr, jobs, repeat("vc_state", len(jobs)), vcs))

    def _run(self, jobs: list[Job], progress: Callable[[int, int], None] | None) -> SimResult:
        state, rec = self._build_state()
        self._check_jobs(state, jobs)
        jobs = sorted(jobs, key=_SUBMIT)  # stable: keeps input order on ties
        # the heap always holds one event at +inf, a sentinel (the loop stops when it is the head
        # and no arrival is left)
        heap: list[tuple] = [SENTINEL]
        # the heap's third key: events at equal (time, priority) keep push order; every push takes
        # the next one, so it also counts the events (the handled ones are those pushed and gone)
        tiebreak = itertools.count(1)
        kernel = self._kernel(state, jobs, heap, tiebreak, progress)
        arrived, instant_done = (_NO_HOOKS if self.power_manager is None
                                 else self._power_hooks(state, rec, jobs, heap, tiebreak))
        rec.begin(jobs[0].submit_time if jobs else 0.0)
        cursor = run_events(kernel, heap, tiebreak, jobs, arrived=arrived, instant_done=instant_done,
                            rebalance=None if kernel.quotas is None else partial(self._rebalance, kernel.quotas))
        popped = next(tiebreak) - 1 - (len(heap) - 1)  # pushed minus left (the +inf sentinel was never pushed)
        return self._result(state, rec, jobs, cursor + popped, progress)  # arrivals + heap events handled

    def _power_hooks(self, state: ClusterState, rec: MetricsRecorder, jobs: list[Job], heap: list[tuple],
                     tiebreak) -> tuple[Callable[[Job, float], None], Callable[[float, int], bool]]:
        """With a power manager: its first events pushed, what an arrival adds to the heap (its
        power events), and the end-of-instant check (stop when only its timers are left; fail
        when jobs wait for good)."""
        power, n_jobs = self.power_manager, len(jobs)
        for t0, what, payload in power.initial_events(state, jobs):
            heapq.heappush(heap, (t0, POWER, next(tiebreak), self._power_event, payload, what))
        last_progress = [jobs[0].submit_time if jobs else 0.0]

        def arrived(job: Job, now: float) -> None:
            for t1, what, payload in power.on_arrival(job, state, now):
                heapq.heappush(heap, (t1, POWER, next(tiebreak), self._power_event, payload, what))

        def instant_done(now: float, cursor: int) -> bool:
            running, queued = rec.running, rec.queued
            if running == 0 and queued == 0 and cursor >= n_jobs:
                return True  # only the power manager's timers are left
            if running or cursor < n_jobs and jobs[cursor].submit_time <= now:
                last_progress[0] = now
            elif now - last_progress[0] > STALL_LIMIT:
                raise SimulationError(f"{queued} jobs have waited {STALL_LIMIT / 86400:.0f} days with "
                                      "nothing running: the power manager never woke nodes for them")
            return False

        return arrived, instant_done

    def _kernel(self, state: ClusterState, jobs: list[Job], heap: list[tuple], tiebreak,
                progress: Callable[[int, int], None] | None) -> Kernel:
        """The kernel this run drives, its physics and backend, and the heap events' handlers
        (closures over the heap: what a finish, a failure and a max-runtime kill do here beyond
        the kernel's handler). A heap event is ``(time, priority, seq, handler, payload, tag)``;
        the loop calls ``handler(payload, tag, now)``."""
        cfg, policy = self.config, self.policy
        overhead = cfg.preemption_overhead
        guard = getattr(policy, "guard", None)  # preemption guards: overhead >= the grace period
        if guard is not None:
            overhead = guard.overhead(overhead)
        physics = Physics(state, self.speed_model, self.failure_model, overhead)
        compat_tick = cfg.compat == "helios" and policy.preemptive
        # an oracle's view reads truth from the physics; other views have none to read
        view = SchedulingView(state, policy.oracle, compat_tick, self.indexes, physics if policy.oracle else None)
        tick = 1.0 if compat_tick else 0.0
        heappush = heapq.heappush
        RUNNING = JobState.RUNNING
        still_due = getattr(self.failure_model, "still_due", None)
        max_failures = cfg.max_failures
        n_jobs = len(jobs)
        progress_every = max(1, n_jobs // 200)

        def push_finish(job: Job, now: float) -> None:
            left = job._remaining / job.speed if job.speed != 1.0 else job._remaining
            heappush(heap, (now + left + tick, FINISH, next(tiebreak), finished, job, job.epoch))

        def push_failure(t1: float, job: Job, reason: str) -> None:
            heappush(heap, (t1, FINISH, next(tiebreak), failed, (job, reason), job.run_seq))

        def push_start(decision, now: float) -> None:
            # = push_finish(decision[0], now) for the plain start (no speed model: speed is 1, no tick)
            job = decision[0]
            heappush(heap, (now + job._remaining, FINISH, next(tiebreak), finished, job, job.epoch))

        def push_start_tick(decision, now: float) -> None:
            # push_start with the Helios 1-s tick (compat="helios" with a preemptive policy)
            job = decision[0]
            heappush(heap, (now + job._remaining + tick, FINISH, next(tiebreak), finished, job, job.epoch))

        def rerated(jobs_moved, now: float) -> None:
            for other in jobs_moved:
                heappush(heap, (now + other._remaining / other.speed + tick, FINISH, next(tiebreak), finished,
                                other, other.epoch))

        backend = SimulatedBackend(physics, push_finish, push_failure, push_start_tick if tick else push_start)
        kernel = Kernel(state, policy, assume=False, view=view, quotas=self._quotas(state), backend=backend,
                        check=cfg.check_invariants, rebalance=rebalance)
        on_finished = kernel.on_finished
        rerate = None if backend.plain else physics.finished  # None: a finish moves no other job
        if rerate is None and progress is None:
            finished = kernel.on_finish_due   # the kernel's handler drops a stale one itself
        else:
            def finished(job: Job, epoch: int, now: float) -> None:
                if epoch != job.epoch or job.state is not RUNNING:
                    return  # stale
                on_finished(job, now)
                if rerate is not None:
                    rerated(rerate(job, now), now)
                if progress is not None and state.finished % progress_every == 0:
                    progress(state.finished, n_jobs)

        def failed(payload: tuple[Job, str], run_seq: int, now: float) -> None:
            job, reason = payload
            if run_seq != job.run_seq or job.state is not RUNNING:
                return  # stale: it stopped before the failure struck
            if still_due is not None and not still_due(job, state, now):
                return  # called off: the state changed before it struck (OOM re-check)
            physics.failing(job, now, reason)
            kernel.on_failed(job, reason, now)
            if job.failures > max_failures:
                raise SimulationError(f"job {job.job_id} failed {job.failures} times (limit "
                                      f"{max_failures}); last: {reason}")
            rerated(physics.failed(job, now), now)

        def limit_due(key: tuple, job: Job, now: float) -> None:
            if job.state is RUNNING:
                kernel.on_timer(key, now)   # kills it if it has run its limit (the kernel checks)
                if job.state is not RUNNING:
                    rerated(physics.finished(job, now), now)

        def arm_limit(time: float, key: tuple, job: Job) -> None:
            heappush(heap, (time, LIMIT, next(tiebreak), limit_due, key, job))

        if any(map(_NOT_NONE, map(_LIMIT, jobs))):  # max runtimes: armed at each start (no cost for runs without)
            state.add_observer(LimitClock(arm_limit))
        self._power_event = self._power_handler(state, heap, tiebreak, kernel)
        self.state, self.view, self.physics, self.kernel, self.decider = state, view, physics, kernel, kernel.decider
        shape = getattr(getattr(policy, "placer", None), "shape_pods", None)
        if shape is not None and any(map(_POD_SHAPE, jobs)):   # in C: no bytecode per job
            shape()   # jobs of several pods: the fast path cuts them into their pods
        policy.prepare(view)
        return kernel

    def _power_handler(self, state: ClusterState, heap: list[tuple], tiebreak, kernel: Kernel):
        """The handler of power events: the power manager carries out ``what`` (its own
        transitions) and says which VCs changed and what follows."""
        power, dirty, vcs = self.power_manager, kernel.decider.dirty, state.vcs

        def power_event(payload, what: str, now: float) -> None:
            vids, follow = power.apply(what, payload, state, now)
            for vid in vids:
                dirty[vcs[vid]] = None
            for t1, what1, payload1 in follow:
                heapq.heappush(heap, (t1, POWER, next(tiebreak), power_event, payload1, what1))

        return power_event

    def _rebalance(self, quotas: QuotaManager, now: float) -> None:
        """Borrowing and reclaim between VCs, after every VC's own pass (``sched/actions/`` on
        the books of ``kernel/quotas.py``); its starts and preemptions reach the backend as a
        pass's do (finish events)."""
        try:
            rebalance(quotas, self.decider, now)
        except StateError as exc:
            raise SimulationError(f"queues: {exc}") from exc
        if self.config.check_invariants:
            self.state.check_invariants()
            quotas.check()

    def _result(self, state: ClusterState, rec: MetricsRecorder, jobs: list[Job], events: int,
                progress: Callable[[int, int], None] | None) -> SimResult:
        """The outcome once the heap ran dry: every job must have ended."""
        n_jobs, policy = len(jobs), self.policy
        if state.finished != n_jobs:
            stuck = [j.job_id for j in jobs if j.state is not JobState.FINISHED][:5]
            raise SimulationError(f"{n_jobs - state.finished} jobs never finished (e.g. {stuck}); "
                                  f"the policy left them waiting with nothing else to happen")
        if self.config.check_invariants:
            state.check_invariants()
        rec.close(max(map(attrgetter("end_time"), jobs), default=0.0))
        if progress is not None:
            progress(n_jobs, n_jobs)
        result = SimResult(jobs, rec, policy.name, policy.placement_name, events,
                           stops={job.job_id: why for job, why in state.terminated.items()})
        result.extra.update(self._outcome_counts(state, jobs))
        if getattr(policy, "guard", None) is not None:  # evictions and the ones its guards refused
            result.extra.update(policy.guard.summary())
        quotas = self.kernel.quotas
        if quotas is not None:
            t0 = jobs[0].submit_time if jobs else 0.0
            result.extra.update(quotas.per_queue(jobs, t0, max(map(attrgetter("end_time"), jobs), default=t0)))
        return result
    def _quotas(self, state: ClusterState):
        """The queue manager when the config's queues may borrow (None: today's fixed VCs)."""
        specs = self.config.queues
        if not specs or not borrowing_possible(specs):
            return None
        blocker = borrowing_blocker(self.policy, state.cap)
        if blocker:
            raise SimulationError(blocker)
        try:
            return QuotaManager(specs, state, self.config.queue_half_life)
        except ValueError as exc:
            raise SimulationError(f"queues: {exc}") from exc

    def _outcome_counts(self, state: ClusterState, jobs: list[Job]) -> dict:
        """Postponements and failures always; slowdowns when a speed model shaped run times."""
        out: dict = {"postponements": state.postponed, "failures": state.failed}
        if any(map(_NOT_NONE, map(_LIMIT, jobs))):   # some job had a max runtime: how many ran into it
            out["time_limit_kills"] = sum(1 for why in state.terminated.values() if why is StopReason.TIME_LIMIT)
        if self.failure_model is not None:
            out["failure_model"] = getattr(self.failure_model, "name", type(self.failure_model).__name__)
            out["jobs_failed_at_least_once"] = sum(1 for j in jobs if j.failures)
        if self.speed_model is not None and jobs:
            run = np.fromiter((j.end_time - j.submit_time - j.queue_delay for j in jobs), float, len(jobs))
            solo = np.fromiter((j._duration for j in jobs), float, len(jobs))
            ok = solo > 0
            slow = run[ok] / solo[ok]
            out["speed_model"] = getattr(self.speed_model, "name", type(self.speed_model).__name__)
            if slow.size:
                out["avg_slowdown"] = float(slow.mean())
                out["p95_slowdown"] = float(np.percentile(slow, 95))
                out["max_slowdown"] = float(slow.max())
                out["jobs_slowed_over_5pct"] = int((slow > 1.05 + 1e-9).sum())
        return out



def run_events(kernel: Kernel, heap: list[tuple], tiebreak: Iterator[int], jobs: Sequence[Job], *,
               rebalance: Callable[[float], None] | None = None,
               arrived: Callable[[Job, float], None] | None = None,
               instant_done: Callable[[float, int], bool] | None = None,
               drop_past_wakeups: bool = False) -> int:
    """THE event loop, the one every simulated run goes through: a simulation (:class:`Simulator`)
    and a forecast (:mod:`dlsched.sim.forecast`, the same loop on a twin of a state). It owns only
    the clock: ``heap`` holds ``(time, priority, seq, handler, payload, tag)`` events (with the
    +inf :data:`SENTINEL` last), ``jobs`` arrive in time order (read with a cursor, not pushed),
    and every stimulus goes to ``kernel``'s handler for it. An instant is handled in a fixed
    order: heap events due before arrivals (finishes, max-runtime kills, power), arrivals, timers,
    then one pass per changed VC (``rebalance(now)`` after it: the queues' borrowing and reclaim),
    then the policy's wake-ups become timers and ``instant_done(now, arrivals so far)`` may end
    the run (True). A wake-up asked for in the past is an error (SimulationError), or dropped
    with ``drop_past_wakeups``. Returns how many jobs arrived."""
    view, decider = kernel.view, kernel.decider
    times = list(map(_SUBMIT, jobs))
    times.append(INF)   # a sentinel: no bounds check on the cursor
    wakeups = view._wakeups
    # hot loop: bind methods and constants to locals
    heappop, heappush = heapq.heappop, heapq.heappush
    on_submitted, on_timer = kernel.on_submitted, kernel.on_timer
    dirty, decide = decider.dirty, decider.decide
    cursor = 0
    while True:
        t_arr = times[cursor]
        t_ev = heap[0][0]
        now = t_arr if t_arr < t_ev else t_ev
        if now == INF:
            break
        view.now = now
        # 1. completions, max-runtime kills, failures and power events: every heap event due
        # now whose priority comes before arrivals, each handled by the handler it carries
        if t_ev == now:
            arrivals = (now, ARRIVAL)
            while heap[0] < arrivals:
                _, _, _, handler, payload, tag = heappop(heap)
                handler(payload, tag, now)
        # 2. arrivals
        while times[cursor] == now:
            job = jobs[cursor]
            cursor += 1
            on_submitted(job, now)
            if arrived is not None:
                arrived(job, now)
        # 3. timers (policy wake-ups); a timer is never pushed for the current instant, so
        # one at ``now`` was the heap's head when the instant began
        if t_ev == now:
            while heap[0][0] == now and heap[0][1] == TIMER:
                on_timer(heappop(heap)[4], now)  # the VC's pass runs even with nothing pending
        # 4. one scheduling pass per changed VC: the kernel's one pass function
        if dirty:
            try:
                decide(now)  # clears dirty and woken
            except StateError as exc:
                raise SimulationError(f"policy {kernel.policy.name}: {exc}") from exc
            if rebalance is not None:
                rebalance(now)
        if wakeups:
            for t1, vid in wakeups:
                if t1 <= now:
                    if drop_past_wakeups:
                        continue
                    raise SimulationError(f"policy {kernel.policy.name} asked for a wake-up in the past")
                heappush(heap, (t1, TIMER, next(tiebreak), None, (VC_TIMER, vid), 0))
            wakeups.clear()
        if instant_done is not None and instant_done(now, cursor):
            break
    return cursor

def simulate(jobs: list[Job], cluster: ClusterSpec, policy, config: SimConfig | None = None, **kw) -> SimResult:
    """One-call convenience wrapper around :class:`Simulator`."""
    return Simulator(cluster, policy, config, **kw).run(jobs)
