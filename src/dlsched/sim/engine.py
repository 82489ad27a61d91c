"""The event loop. Time jumps from event to event; nothing ticks.

Events at the same instant are handled in a fixed order — job completions, then node power
changes, then arrivals, then timers — and afterwards each VC that saw a change gets one
scheduling pass. Events sit in one heap keyed ``(time, priority, sequence)``; arrivals are
read from the time-sorted job list with a cursor instead of being pushed. A finish event that
became stale (the job was preempted or changed speed) is dropped lazily via the job's epoch.
"""

from __future__ import annotations

import gc
import heapq
import math
from dataclasses import dataclass, field
from typing import Callable, Iterable

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.metrics.recorder import MetricsRecorder
from dlsched.sim.config import SimConfig
from dlsched.sim.decisions import Preempt, Start
from dlsched.sim.state import ClusterState, StateError
from dlsched.sim.view import SchedulingView

# event priorities at equal times
FINISH, POWER, TIMER = 0, 1, 3

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
    """Runs one policy over one job list on one cluster."""

    def __init__(self, cluster: ClusterSpec, policy, config: SimConfig | None = None,
                 speed_model=None, power_manager=None) -> None:
        self.cluster = cluster
        self.policy = policy
        self.config = config or SimConfig()
        self.speed_model = speed_model
        self.power_manager = power_manager

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

    def _run(self, jobs: list[Job], progress: Callable[[int, int], None] | None) -> SimResult:
        cfg = self.config
        state = ClusterState(self.cluster)
        policy = self.policy
        for vc in state.vcs:
            vc.queue = policy.new_queue()
        compat_tick = cfg.compat == "helios" and getattr(policy, "preemptive", False)
        view = SchedulingView(state, getattr(policy, "oracle", False), compat_tick)
        rec = MetricsRecorder(state, cfg.timeline_interval)
        self.state, self.view, self.recorder = state, view, rec
        overhead = cfg.preemption_overhead
        speed_model = self.speed_model
        power = self.power_manager
        check = cfg.check_invariants
        tick = 1.0 if compat_tick else 0.0

        for job in jobs:
            job.reset()
            vc_id = state.vc_index.get(job.vc)
            if vc_id is None:
                raise SimulationError(f"job {job.job_id}: VC {job.vc!r} is not in the cluster "
                                      f"(known: {', '.join(state.vc_index)})")
            job.vc_state = state.vcs[vc_id]
            if job.gpus > state.vcs[vc_id].total_gpus:
                raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs but VC {job.vc!r} has only "
                                      f"{state.vcs[vc_id].total_gpus}: it could never run")
        jobs = sorted(jobs, key=lambda j: j.submit_time)  # stable: keeps input order on ties
        n_jobs = len(jobs)
        heap: list[tuple] = []
        seq = 0
        cursor = 0
        events = 0
        running = 0
        queued = 0
        vcs = state.vcs
        on_finish = getattr(policy, "job_finished", None)
        on_submit = getattr(policy, "job_submitted", None)
        if hasattr(policy, "prepare"):
            policy.prepare(view, jobs)
        if power is not None:
            for t0, kind, payload in power.initial_events(state, jobs):
                seq += 1
                heapq.heappush(heap, (t0, POWER, seq, kind, payload, 0))
        progress_every = max(1, n_jobs // 200)

        def push_finish(job: Job, now: float) -> None:
            nonlocal seq
            seq += 1
            left = job.remaining / job.speed if job.speed != 1.0 else job.remaining
            heapq.heappush(heap, (now + left + tick, FINISH, seq, "finish", job, job.epoch))

        def settle(job: Job, now: float) -> None:
            """Book the work done since ``run_since`` into ``remaining``."""
            job.remaining -= (now - job.run_since) * job.speed
            if job.remaining < 0.0:
                job.remaining = 0.0
            job.run_since = now

        def respeed(jobs_: Iterable[Job], now: float) -> None:
            for other in jobs_:
                if other.state is not JobState.RUNNING:
                    continue
                new = speed_model.speed(other, state)
                if new != other.speed:
                    settle(other, now)
                    other.speed = new
                    other.epoch += 1
                    push_finish(other, now)

        rec.begin(jobs[0].submit_time if jobs else 0.0)
        vc_area, vc_last = rec.vc_area, rec.vc_last
        dirty: dict[int, None] = {}
        # hot loop: bind methods and constants to locals
        heappop, heappush = heapq.heappop, heapq.heappush
        finish, submit, start = state.finish, state.submit, state.start
        schedule = policy.schedule
        RUNNING = JobState.RUNNING
        last_progress = jobs[0].submit_time if jobs else 0.0
        while True:
            t_arr = jobs[cursor].submit_time if cursor < n_jobs else INF
            t_ev = heap[0][0] if heap else INF
            now = t_arr if t_arr < t_ev else t_ev
            if now == INF:
                break
            view.now = now
            # time-weighted levels: the state was constant since the last event time
            if now != rec.t_last:
                dt = now - rec.t_last
                rec.busy_area += state.busy_gpus * dt
                rec.powered_area += state.powered_gpus * dt
                rec.t_last = now
            if now >= rec.next_row:
                rec.add_row(now, running, queued)
            # 1. completions and power events (priority < arrival)
            while heap and heap[0][0] == now and heap[0][1] <= POWER:
                _, prio, _, kind, payload, epoch = heappop(heap)
                events += 1
                if kind == "finish":
                    job = payload
                    if epoch != job.epoch or job.state is not RUNNING:
                        continue  # stale
                    vc = finish(job, now)
                    running -= 1
                    vid = vc.vid
                    vc_area[vid] += (vc.busy + job.gpus) * (now - vc_last[vid])
                    vc_last[vid] = now
                    dirty[vid] = None
                    if on_finish is not None:
                        on_finish(job, now)
                    if speed_model is not None:
                        respeed(speed_model.affected(job, state), now)
                    if progress is not None and state.finished % progress_every == 0:
                        progress(state.finished, n_jobs)
                else:
                    vids, follow = power.apply(kind, payload, state, now)
                    for vid in vids:
                        dirty[vid] = None
                    for t1, kind1, payload1 in follow:
                        seq += 1
                        heappush(heap, (t1, POWER, seq, kind1, payload1, 0))
            # 2. arrivals
            while cursor < n_jobs and jobs[cursor].submit_time == now:
                job = jobs[cursor]
                cursor += 1
                events += 1
                if on_submit is not None:
                    on_submit(job, now)  # before queueing: the policy may set the job's key
                vc = submit(job, now)
                queued += 1
                dirty[vc.vid] = None
                if power is not None:
                    for t1, kind, payload in power.on_arrival(job, state, now):
                        seq += 1
                        heappush(heap, (t1, POWER, seq, kind, payload, 0))
            # 3. timers (policy wake-ups)
            while heap and heap[0][0] == now and heap[0][1] == TIMER:
                _, _, _, kind, payload, _ = heappop(heap)
                events += 1
                dirty[payload] = None
            # 4. one scheduling pass per changed VC
            for vid in dirty:
                vc = vcs[vid]
                if not vc.pending:  # nothing pending: no policy has anything to decide
                    continue
                for decision in schedule(view, vc):
                    job = decision.job
                    if type(decision) is Start:
                        if job.vc_state is not vc:
                            raise SimulationError(f"policy started job {job.job_id} outside its VC")
                        try:
                            start(job, decision.placement, now, decision.shared)
                        except StateError as exc:
                            raise SimulationError(f"policy {policy.name}: {exc}") from exc
                        running += 1
                        queued -= 1
                        vc_area[vid] += (vc.busy - job.gpus) * (now - vc_last[vid])
                        vc_last[vid] = now
                        if speed_model is not None:
                            job.speed = speed_model.speed(job, state)
                            respeed(speed_model.affected(job, state), now)
                        # push_finish(job, now), inlined: this is the hottest path
                        seq += 1
                        left = job.remaining / job.speed if job.speed != 1.0 else job.remaining
                        heappush(heap, (now + left + tick, FINISH, seq, "finish", job, job.epoch))
                    elif type(decision) is Preempt:
                        settle(job, now)
                        job.remaining += overhead(job)
                        state.preempt(job, now)
                        running -= 1
                        queued += 1
                        rec.vc_changed(vc, now, -job.gpus)
                        if speed_model is not None:
                            respeed(speed_model.affected(job, state), now)
                    else:
                        raise SimulationError(f"policy {policy.name} returned {decision!r}")
                if check:
                    state.check_invariants()
            dirty.clear()
            if view._wakeups:
                for t1, vid in view._wakeups:
                    if t1 <= now:
                        raise SimulationError(f"policy {policy.name} asked for a wake-up in the past")
                    seq += 1
                    heappush(heap, (t1, TIMER, seq, "wake", vid, 0))
                view._wakeups.clear()
            if power is not None:
                if running == 0 and queued == 0 and cursor >= n_jobs:
                    break  # only the power manager's timers are left
                if running:
                    last_progress = now
                elif cursor < n_jobs and jobs[cursor].submit_time <= now:
                    last_progress = now
                elif now - last_progress > STALL_LIMIT:
                    raise SimulationError(f"{queued} jobs have waited {STALL_LIMIT / 86400:.0f} days with "
                                          "nothing running: the power manager never woke nodes for them")

        if state.finished != n_jobs:
            stuck = [j.job_id for j in jobs if j.state is not JobState.FINISHED][:5]
            raise SimulationError(f"{n_jobs - state.finished} jobs never finished (e.g. {stuck}); "
                                  f"the policy left them waiting with nothing else to happen")
        if check:
            state.check_invariants()
        rec.close(max((j.end_time for j in jobs), default=0.0))
        if progress is not None:
            progress(n_jobs, n_jobs)
        return SimResult(jobs, rec, policy.name, getattr(policy, "placement_name", ""), events)


def simulate(jobs: list[Job], cluster: ClusterSpec, policy, config: SimConfig | None = None, **kw) -> SimResult:
    """One-call convenience wrapper around :class:`Simulator`."""
    return Simulator(cluster, policy, config, **kw).run(jobs)
