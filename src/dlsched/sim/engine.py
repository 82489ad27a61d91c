"""The event loop of the simulated backend. Time jumps from event to event; nothing ticks.

The loop owns only the clock and the heap: every change of cluster state goes through the
kernel (:class:`~dlsched.kernel.state.ClusterState`: ``submit``, decisions through the
dispatcher, ``finish``, ``fail``, power transitions), which the live service drives too; what a
transition does to the jobs' ground truth (speed, failures, remaining time) is the physics'
(:class:`~dlsched.sim.physics.Physics`), asked after each transition. Metrics are a kernel
observer. Events at the same instant are handled in a fixed order — job completions
and failures, then node power changes, then arrivals, then timers — and afterwards each VC that
saw a change gets one scheduling pass. Events sit in one heap keyed ``(time, priority,
sequence)``; arrivals are read from the time-sorted job list with a cursor instead of being
pushed. A finish or failure event that became stale (the job was preempted, failed or changed
speed) is dropped lazily via the job's epoch.
"""

from __future__ import annotations

import gc
import heapq
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from operator import attrgetter

import numpy as np

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.decide import Decider
from dlsched.kernel.quotas import QuotaManager, borrowing_possible
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.view import SchedulingView
from dlsched.metrics.recorder import MetricsRecorder
from dlsched.sched.indexes import attach_plugins
from dlsched.sched.protocols import FailureModel, Policy, SpeedModel
from dlsched.sim.backend import SimulatedBackend
from dlsched.sim.config import SimConfig
from dlsched.sim.physics import Physics

_POD_SHAPE = attrgetter("_spec.gpus_per_pod")

# event priorities at equal times
FINISH, POWER, TIMER, END = 0, 1, 3, 9

INF = math.inf
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
        created = JobState.CREATED
        by_name = {vc.name: vc for vc in state.vcs}
        for job in jobs:
            if job.state is not created:  # it ran before: clear its runtime state (fresh jobs have none)
                job.reset()
            vc = by_name.get(job.vc)
            if vc is None:
                raise SimulationError(f"job {job.job_id}: VC {job.vc!r} is not in the cluster "
                                      f"(known: {', '.join(state.vc_index)})")
            job.vc_state = vc
            if job.gpus > vc.total_gpus:
                raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs but VC {job.vc!r} has only "
                                      f"{vc.total_gpus}: it could never run")

    def _run(self, jobs: list[Job], progress: Callable[[int, int], None] | None) -> SimResult:
        cfg = self.config
        policy = self.policy
        state, rec = self._build_state()
        overhead = cfg.preemption_overhead
        guard = getattr(policy, "guard", None)  # preemption guards: overhead >= the grace period
        if guard is not None:
            overhead = guard.overhead(overhead)
        physics = Physics(state, self.speed_model, self.failure_model, overhead)
        compat_tick = cfg.compat == "helios" and policy.preemptive
        # an oracle's view reads truth from the physics; other views have none to read
        view = SchedulingView(state, policy.oracle, compat_tick, self.indexes, physics if policy.oracle else None)
        self.state, self.view, self.recorder, self.physics = state, view, rec, physics
        power = self.power_manager
        check = cfg.check_invariants
        tick = 1.0 if compat_tick else 0.0
        max_failures = cfg.max_failures

        self._check_jobs(state, jobs)
        shape = getattr(getattr(policy, "placer", None), "shape_pods", None)
        if shape is not None and any(map(_POD_SHAPE, jobs)):   # in C: no bytecode per job
            shape()   # jobs of several pods: the fast path cuts them into their pods
        quotas = self._quotas(state)
        by_submit = attrgetter("submit_time")
        jobs = sorted(jobs, key=by_submit)  # stable: keeps input order on ties
        n_jobs = len(jobs)
        # Sentinels keep the hot loop free of bounds checks: arrival times end with +inf, and the
        # heap always holds one event at +inf (the loop stops when both are reached).
        times = list(map(by_submit, jobs))
        times.append(INF)
        heap: list[tuple] = [(INF, END, 0, "end", None, 0)]
        # the heap's third key: events at equal (time, priority) keep push order; every push takes
        # the next one, so it also counts the events (the handled ones are those pushed and gone)
        tiebreak = itertools.count(1)
        cursor = 0
        vcs = state.vcs
        on_finish = policy.job_finished  # None: no hook (PolicyBase), skipped per finish
        on_submit = policy.job_submitted
        on_failed = policy.job_failed
        policy.prepare(view)
        if power is not None:
            for t0, kind, payload in power.initial_events(state, jobs):
                heapq.heappush(heap, (t0, POWER, next(tiebreak), kind, payload, 0))
        progress_every = max(1, n_jobs // 200)

        rec.begin(jobs[0].submit_time if jobs else 0.0)
        wakeups = view._wakeups
        # hot loop: bind methods and constants to locals
        heappop, heappush = heapq.heappop, heapq.heappush
        finish, submit = state.finish, state.submit
        still_due = getattr(self.failure_model, "still_due", None)

        def push_finish(job: Job, now: float) -> None:
            left = job._remaining / job.speed if job.speed != 1.0 else job._remaining
            heappush(heap, (now + left + tick, FINISH, next(tiebreak), "finish", job, job.epoch))

        def push_failure(t1: float, job: Job, reason: str) -> None:
            heappush(heap, (t1, FINISH, next(tiebreak), "fail", (job, reason), job.run_seq))

        def push_start(decision, now: float) -> None:
            # = push_finish(decision[0], now) for the plain start (no speed model: speed is 1, no tick)
            job = decision[0]
            heappush(heap, (now + job._remaining, FINISH, next(tiebreak), "finish", job, job.epoch))

        def push_start_tick(decision, now: float) -> None:
            # push_start with the Helios 1-s tick (compat="helios" with a preemptive policy)
            job = decision[0]
            heappush(heap, (now + job._remaining + tick, FINISH, next(tiebreak), "finish", job, job.epoch))

        backend = SimulatedBackend(physics, push_finish, push_failure, push_start_tick if tick else push_start)
        rerate = None if backend.plain else physics.finished  # None: a finish moves no other job
        # anything to do after a finish beyond the kernel's transition (one test per finish when not)
        after_finish = rerate is not None or on_finish is not None or progress is not None
        decider = Decider(state, view, policy, backend, check=check)
        self.decider = decider
        dirty, woken, decide = decider.dirty, decider.woken, decider.decide
        RUNNING = JobState.RUNNING
        last_progress = jobs[0].submit_time if jobs else 0.0
        while True:
            t_arr = times[cursor]
            t_ev = heap[0][0]
            now = t_arr if t_arr < t_ev else t_ev
            if now == INF:
                break
            view.now = now
            # 1. completions, failures and power events (priority < arrival)
            if t_ev == now:
                while heap[0][0] == now and heap[0][1] <= POWER:
                    _, prio, _, kind, payload, epoch = heappop(heap)
                    if kind == "finish":
                        job = payload
                        if epoch != job.epoch or job.state is not RUNNING:
                            continue  # stale
                        dirty[finish(job, now)] = None
                        if after_finish:
                            if rerate is not None:
                                for other in rerate(job, now):
                                    heappush(heap, (now + other._remaining / other.speed + tick, FINISH,
                                                    next(tiebreak), "finish", other, other.epoch))
                            if on_finish is not None:
                                on_finish(job, now)
                            if progress is not None and state.finished % progress_every == 0:
                                progress(state.finished, n_jobs)
                    elif kind == "fail":
                        job, reason = payload
                        if epoch != job.run_seq or job.state is not RUNNING:
                            continue  # stale: it stopped before the failure struck
                        if still_due is not None and not still_due(job, state, now):
                            continue  # called off: the state changed before it struck (OOM re-check)
                        physics.failing(job, now, reason)
                        state.fail(job, now, reason)
                        changed = physics.failed(job, now)
                        if job.failures > max_failures:
                            raise SimulationError(f"job {job.job_id} failed {job.failures} times (limit "
                                                  f"{max_failures}); last: {reason}")
                        dirty[job.vc_state] = None
                        if on_failed is not None:
                            on_failed(job, now, reason)
                        for other in changed:
                            heappush(heap, (now + other._remaining / other.speed + tick, FINISH, next(tiebreak),
                                            "finish", other, other.epoch))
                    else:
                        vids, follow = power.apply(kind, payload, state, now)
                        for vid in vids:
                            dirty[vcs[vid]] = None
                        for t1, kind1, payload1 in follow:
                            heappush(heap, (t1, POWER, next(tiebreak), kind1, payload1, 0))
            # 2. arrivals
            while times[cursor] == now:
                job = jobs[cursor]
                cursor += 1
                if on_submit is not None:
                    on_submit(job, now)  # before queueing: the policy may set the job's key
                dirty[submit(job, now)] = None
                if power is not None:
                    for t1, kind, payload in power.on_arrival(job, state, now):
                        heappush(heap, (t1, POWER, next(tiebreak), kind, payload, 0))
            # 3. timers (policy wake-ups); a timer is never pushed for the current instant, so
            # one at ``now`` was the heap's head when the instant began
            if t_ev == now:
                while heap[0][0] == now and heap[0][1] == TIMER:
                    payload = heappop(heap)[4]
                    vc = vcs[payload]
                    dirty[vc] = None
                    woken.add(vc)  # a pass the policy asked for runs even with nothing pending
            # 4. one scheduling pass per changed VC: the kernel's one pass function
            if dirty:
                try:
                    decide(now)  # clears dirty and woken
                except StateError as exc:
                    raise SimulationError(f"policy {policy.name}: {exc}") from exc
                if quotas is not None:
                    # borrowing and reclaim between VCs, after every VC's own pass (kernel/quotas.py);
                    # its starts and preemptions reach the backend as a pass's do (finish events)
                    try:
                        quotas.rebalance(decider, now)
                    except StateError as exc:
                        raise SimulationError(f"queues: {exc}") from exc
                    if check:
                        state.check_invariants()
                        quotas.check()
            if wakeups:
                for t1, vid in wakeups:
                    if t1 <= now:
                        raise SimulationError(f"policy {policy.name} asked for a wake-up in the past")
                    heappush(heap, (t1, TIMER, next(tiebreak), "wake", vid, 0))
                wakeups.clear()
            if power is not None:
                running = rec.running
                queued = rec.queued
                if running == 0 and queued == 0 and cursor >= n_jobs:
                    break  # only the power manager's timers are left
                if running or cursor < n_jobs and jobs[cursor].submit_time <= now:
                    last_progress = now
                elif now - last_progress > STALL_LIMIT:
                    raise SimulationError(f"{queued} jobs have waited {STALL_LIMIT / 86400:.0f} days with "
                                          "nothing running: the power manager never woke nodes for them")
        popped = next(tiebreak) - 1 - (len(heap) - 1)  # pushed minus left (the +inf sentinel was never pushed)
        events = cursor + popped  # arrivals plus the heap events handled (stale ones included)

        if state.finished != n_jobs:
            stuck = [j.job_id for j in jobs if j.state is not JobState.FINISHED][:5]
            raise SimulationError(f"{n_jobs - state.finished} jobs never finished (e.g. {stuck}); "
                                  f"the policy left them waiting with nothing else to happen")
        if check:
            state.check_invariants()
        rec.close(max(map(attrgetter("end_time"), jobs), default=0.0))
        if progress is not None:
            progress(n_jobs, n_jobs)
        result = SimResult(jobs, rec, policy.name, policy.placement_name, events)
        result.extra.update(self._outcome_counts(state, jobs))
        if getattr(policy, "guard", None) is not None:  # evictions and the ones its guards refused
            result.extra.update(policy.guard.summary())
        if quotas is not None:
            t0 = jobs[0].submit_time if jobs else 0.0
            result.extra.update(quotas.per_queue(jobs, t0, max(map(attrgetter("end_time"), jobs), default=t0)))
        return result

    def _quotas(self, state: ClusterState):
        """The queue manager when the config's queues may borrow (None: today's fixed VCs)."""
        specs = self.config.queues
        if not specs or not borrowing_possible(specs):
            return None
        if getattr(self.policy, "preemptive", False):
            raise SimulationError(f"queues that borrow need a non-preemptive ordering policy; "
                                  f"{self.policy.name} preempts on its own")
        if state.cap != 1:
            raise SimulationError("queues that borrow need exclusive GPUs (max_jobs_per_gpu = 1)")
        try:
            return QuotaManager(specs, state, self.config.queue_half_life)
        except ValueError as exc:
            raise SimulationError(f"queues: {exc}") from exc

    def _outcome_counts(self, state: ClusterState, jobs: list[Job]) -> dict:
        """Postponements and failures always; slowdowns when a speed model shaped run times."""
        out: dict = {"postponements": state.postponed, "failures": state.failed}
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


def simulate(jobs: list[Job], cluster: ClusterSpec, policy, config: SimConfig | None = None, **kw) -> SimResult:
    """One-call convenience wrapper around :class:`Simulator`."""
    return Simulator(cluster, policy, config, **kw).run(jobs)
