"""The forecast: the simulator's engine run on a twin of a state (:mod:`dlsched.sim.twin`).

A :class:`ForwardRun` holds a twin (its running jobs restarted, its waiting jobs queued), the
policy's copy and a :class:`~dlsched.kernel.entry.Kernel` over them; :meth:`ForwardRun.run` hands
them to the engine's one event loop (:func:`dlsched.sim.engine.run_events`) with the forecast's
physics (:class:`ForecastPhysics`: a twin runs its predicted duration, at solo speed; a
preempted twin keeps the work it did and redoes the checkpoint's cost) until every waiting job of
interest has started. Every stimulus goes to the kernel's handlers, as in a simulation: finishes,
policy timers, max-runtime kills (a twin with ``time_limit_s`` is killed at its limit, counted in
run time over all its runs), passes, the queues' borrowing and reclaim. What differs from a
simulation is only what a forecast needs:

* no job arrives (later arrivals are unknown) and the policy's hooks are not called
  (``Kernel(hooks=False)``: it must not learn from predicted ends);
* the twin is decided once at ``now`` *before* the loop's first instant (the kernel's
  ``on_pass``), as the state stands: a running twin whose predicted end is ``now`` ends after
  that pass, at the loop's first instant;
* a wake-up asked for at or before its instant is dropped (a policy's guard computed from a
  twin's predictions), where a simulation fails;
* the run stops early: after the instant in which the last waiting job of interest started
  (its finishes are still handled: ``events`` counts them), after ``max_events`` ends, or after
  :data:`IDLE_TIMER_LIMIT` instants in a row with nothing running and nothing started.

The ETA of a waiting job is the time its twin starts; one that never starts gets ``inf``.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from heapq import heappush
from itertools import count

from dlsched.core.job import Job, JobState
from dlsched.core.truth import remaining as _forecast_left
from dlsched.core.truth import set_remaining as _book_left
from dlsched.kernel.decisions import Preempt, Start
from dlsched.kernel.entry import Kernel
from dlsched.kernel.limits import LimitClock
from dlsched.kernel.quotas import QuotaManager
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.actions import rebalance as rebalance_queues
from dlsched.sim.engine import FINISH, LIMIT, SENTINEL, TIMER, run_events

INF = math.inf
_RUNNING = JobState.RUNNING
IDLE_TIMER_LIMIT = 10_000   # policy wake-ups in a row with nothing running and nothing started: stop
STOP = 1.5   # the forecast's stop event: after an instant's finishes and kills, before its timers and pass


@dataclass(slots=True)
class EtaResult:
    """ETAs of the waiting jobs (absolute times, ``inf``: never in the forward run) and counts."""

    now: float
    eta: dict[Job, float] = field(default_factory=dict)
    unpredicted: int = 0        # jobs without a prediction of their own: ``predict`` (or the default) used
    overrun: int = 0            # running jobs already past their predicted duration
    starts: int = 0             # starts simulated
    events: int = 0             # ends handled (finishes, and max-runtime kills)

    def by_id(self) -> dict[str, float]:
        return {job.job_id: t for job, t in self.eta.items()}


class ForecastPhysics:
    """The forecast's backend (what a carried-out decision means for a twin): a start schedules
    the twin's predicted end on the engine's heap and, for a waiting job's twin, records its ETA;
    a preempted twin keeps the work it did (plus ``overhead(job)`` seconds redone), and its
    scheduled end goes stale (its epoch)."""

    __slots__ = ("run", "left_to_start", "postponed", "overhead")

    def __init__(self, run: ForwardRun, overhead: Callable[[Job], float] | None) -> None:
        self.run = run
        self.overhead = overhead
        origin, wanted = run.origin, run.wanted
        self.left_to_start = len(origin) if wanted is None else sum(1 for j in origin.values() if j in wanted)
        self.postponed = None

    def started(self, decision: Start, t: float) -> None:
        job = decision[0]
        run = self.run
        run.result.starts += 1
        run.push_end(job, t + _forecast_left(job))
        first = run.origin.pop(job, None)
        if first is not None:
            run.result.eta[first] = t
            if run.wanted is None or first in run.wanted:
                self.left_to_start -= 1

    def preempted(self, decision: Preempt, moved, t: float) -> None:
        job = decision[0]
        left = _forecast_left(job) - (t - job.run_since)   # twins run at solo speed
        left = left if left > 0.0 else 0.0
        if self.overhead is not None:
            left += self.overhead(job)
        _book_left(job, left)
        job.run_since = t


class ForwardRun:
    """A twin and a policy copy, ready to run forward until every waiting job has started (the
    live service copies under its lock, then runs without it: :meth:`run` touches nothing of the
    original). ``origin``: twin -> the real waiting job; ``wanted``: the real jobs whose ETA is
    asked (None: all)."""

    def __init__(self, twin: ClusterState, policy, now: float, result: EtaResult, max_events: int | None,
                 indexes: dict | None = None, quotas: QuotaManager | None = None,
                 overhead: Callable[[Job], float] | None = None) -> None:
        self.twin = twin
        self.indexes = indexes or {}         # the twin's plug-in indexes (fork_policy made them)
        self.policy = policy
        self.now = now
        self.result = result
        self.max_events = max_events
        self.quotas = quotas                 # the twin's queue manager (queues that borrow)
        self.overhead = overhead             # seconds a preempted twin redoes
        self.heap: list[tuple] = [SENTINEL]  # the engine's heap: (time, priority, seq, handler, payload, tag)
        self.tiebreak: Iterator[int] = count(1)
        self.pending = 0                     # end events in the heap, stale ones included
        self.origin: dict[Job, Job] = {}
        self.wanted: set[Job] | None = None
        self.kernel: Kernel | None = None    # made by :meth:`run`
        self.limits = LimitClock(self._arm_limit)   # the snapshot observes starts with it when a twin has a limit

    # -- the heap events of a forecast (the engine calls ``handler(payload, tag, now)``) -----------
    def push_end(self, job: Job, time: float) -> None:
        """Schedule ``job``'s predicted end (stale once its epoch moves)."""
        self.pending += 1
        heappush(self.heap, (time, FINISH, next(self.tiebreak), self._ended, job, job.epoch))

    def _ended(self, job: Job, epoch: int, now: float) -> None:
        self.pending -= 1
        if epoch != job.epoch or job.state is not _RUNNING:
            return   # stale: the twin was preempted (or killed) since
        host = self.twin.hosts.get(job) if self.twin.hosts else None
        self.kernel.on_finished(job, now)
        self.result.events += 1
        if host is not None:   # a borrowed twin freed the lender's GPUs
            self.kernel.decider.dirty[host] = None

    def _arm_limit(self, time: float, key: tuple, job: Job) -> None:
        heappush(self.heap, (time, LIMIT, next(self.tiebreak), self._limit_due, key, job))

    def _limit_due(self, key: tuple, job: Job, now: float) -> None:
        if job.state is _RUNNING:
            self.kernel.on_timer(key, now)   # kills it if it has run its limit (the kernel checks)
            if job.state is not _RUNNING:
                self.result.events += 1

    def _stop(self, payload: None, tag: int, now: float) -> None:
        """The instant after the last wanted start: its ends are handled; nothing else runs."""
        del self.heap[:]
        self.heap.append(SENTINEL)
        decider = self.kernel.decider
        decider.dirty.clear()
        decider.woken.clear()

    # -- the run ----------------------------------------------------------------------------------
    def run(self) -> EtaResult:
        """The engine's loop on the twin (see the module docstring for what a forecast changes)."""
        twin, policy, result, origin, wanted = self.twin, self.policy, self.result, self.origin, self.wanted
        physics = ForecastPhysics(self, self.overhead)
        if physics.left_to_start:
            view = SchedulingView(twin, getattr(policy, "oracle", False), indexes=self.indexes)
            kernel = self.kernel = Kernel(twin, policy, assume=False, view=view, quotas=self.quotas,
                                          backend=physics, hooks=False, rebalance=rebalance_queues)
            for vc in twin.vcs:
                if vc.pending:
                    kernel.mark(vc.vid)
            now = self.now
            view.now = now
            kernel.on_pass(now)   # decided as the state stands, before what ends at ``now``
            heap, tiebreak = self.heap, self.tiebreak
            for action in kernel.log.actions:   # the pass's wake-ups (Timer actions)
                if action.time > now:
                    heappush(heap, (action.time, TIMER, next(tiebreak), None, action.key, 0))
            kernel.log.actions.clear()
            done = self._instant_done(physics)
            if not done(now, 0):
                quotas = self.quotas
                rebalance = None if quotas is None else partial(rebalance_queues, quotas, kernel.decider)
                run_events(kernel, heap, tiebreak, (), rebalance=rebalance, instant_done=done,
                           drop_past_wakeups=True)
        for job in origin.values():  # never started in the forward run
            if wanted is None or job in wanted:
                result.eta[job] = INF
        if wanted is not None:
            result.eta = {j: e for j, e in result.eta.items() if j in wanted}
        return result

    def _instant_done(self, physics: ForecastPhysics) -> Callable[[float, int], bool]:
        """The engine's end-of-instant check for a forecast: stop when nothing is left, after
        ``max_events`` ends or :data:`IDLE_TIMER_LIMIT` idle instants; once every wanted job has
        started, a stop event at the next instant (its ends still count)."""
        result, heap = self.result, self.heap
        max_events = self.max_events if self.max_events is not None else INF
        seen = [0, 0]   # starts at the last instant's end, idle instants in a row

        def done(now: float, _arrived: int) -> bool:
            # a policy that keeps asking for wake-ups while nothing runs must not loop forever
            seen[1] = seen[1] + 1 if not self.pending and result.starts == seen[0] else 0
            seen[0] = result.starts
            t_next = heap[0][0]
            if t_next == INF or result.events >= max_events or seen[1] > IDLE_TIMER_LIMIT:
                return True
            if not physics.left_to_start:
                heappush(heap, (t_next, STOP, next(self.tiebreak), self._stop, None, 0))
            return False

        return done

