"""Start-time estimates ("when will my job start?") by a forward simulation of the current state.

The estimate copies the cluster as it is now into a fresh :class:`~dlsched.kernel.state.ClusterState`
(same nodes, VCs, cordons, power, GPU-sharing cap, same placements of the running jobs) and runs
the *same* policy's passes on it (its queue order and its placement pipeline), with durations
taken from predictions only:

* a running job ends after its predicted duration minus the time it has run since its last start;
  a job that has outrun its prediction is expected to run ``overrun`` x its elapsed time more
  (long-running jobs tend to run long: a prediction that was too short says little else);
* a waiting job runs for its predicted duration (``job.pred_duration``: QSSF's estimator sets it)
  or, where it has none, what ``predict(job)`` says.

Nothing of the ground truth is read: the copies' "true" durations *are* the predictions, set and
read through :mod:`dlsched.core.truth` (:func:`~dlsched.core.truth.forecast`; this module's listed
exception in ``tests/test_truth_access.py``: it touches the copies' truth only). No job
arrives in the forward run (later arrivals are unknown), the policy's hooks are not called (its
estimator must not learn from predicted ends) and a placement plug-in that keeps an index gets a
fresh copy bound to the copied state. The ETA of a waiting job is the time its copy starts; a job
that never starts in the forward run (its VC cannot hold it) gets ``inf``. With perfect
predictions, no later arrivals and no ground-truth speed effects the ETA equals the actual start
(``tests/test_eta.py``).

**Queues that borrow.** When a :class:`~dlsched.kernel.quotas.QuotaManager` runs on the state (the
simulator installs one for queues that may borrow, docs/queues.md), the copy runs one too, as the
simulator does: after each instant's passes, ``rebalance`` lends idle GPUs to blocked heads and
reclaims them for lenders. The copy's manager gets the same queue tree and half-life, the decayed
usage each queue has at ``now`` (the order in which blocked queues borrow and are reclaimed) and
the loans of the jobs running on borrowed GPUs; a reclaimed twin keeps its work and redoes
``preemption_overhead(job)`` seconds (the run's checkpoint cost; none when not given). Without
the manager a job whose queue would borrow gets the start of fixed VCs: too late. ``queues=``
replaces the state's queues in the copy (a what-if on quotas, :mod:`dlsched.sched.whatif`).

A policy that keeps state observed from the kernel (``fairshare``'s per-user usage) may define
``fork(now)``: the copy it returns carries that state as of ``now`` for the forward run, which
observes its own twins from then on (the original learns nothing from the copy).
"""

from __future__ import annotations

import copy
import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from dlsched.core.cluster import ClusterSpec, VirtualCluster
from dlsched.core.job import Job, JobState, Predicted
from dlsched.core.truth import duration as _forecast_duration
from dlsched.core.truth import forecast
from dlsched.core.truth import remaining as _forecast_left
from dlsched.core.truth import set_remaining as _book_left
from dlsched.kernel.decide import Decider
from dlsched.kernel.decisions import Preempt, Start
from dlsched.kernel.quotas import DEFAULT_HALF_LIFE, QueueSpec, QuotaManager, borrowing_possible
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.indexes import attach_plugins

INF = math.inf
_RUNNING = JobState.RUNNING
IDLE_TIMER_LIMIT = 10_000   # policy wake-ups in a row with nothing running and nothing started: stop
# what a copy keeps of a job: its request and predictions (what a policy may read)
_PUBLIC = ("index", "job_id", "user", "name", "gpus", "submit_time", "_spec", "pred_duration",
           "priority")  # _spec: the shared rest of the request (VC included)


@dataclass(slots=True)
class EtaResult:
    """ETAs of the waiting jobs (absolute times, ``inf``: never in the forward run) and counts."""

    now: float
    eta: dict[Job, float] = field(default_factory=dict)
    unpredicted: int = 0        # jobs without a prediction of their own: ``predict`` (or the default) used
    overrun: int = 0            # running jobs already past their predicted duration
    starts: int = 0             # starts simulated
    events: int = 0             # finish events handled

    def by_id(self) -> dict[str, float]:
        return {job.job_id: t for job, t in self.eta.items()}


class Calibration:
    """Scale for predicted durations so that their *sum* matches what finished jobs really ran.

    Duration predictors aim at a typical job (QSSF's are about right in the median and about 2.5x
    short in the sum on the built-in workload, whose durations are heavy-tailed), while a start
    time is a sum of the durations ahead. ``factor`` = run time of the finished jobs / their
    predictions (1 until ``min_jobs`` have finished; clipped to [``lo``, ``hi``])."""

    def __init__(self, min_jobs: int = 50, lo: float = 0.1, hi: float = 10.0) -> None:
        self.min_jobs, self.lo, self.hi = min_jobs, lo, hi
        self.jobs = 0
        self.predicted = 0.0
        self.actual = 0.0

    def observe(self, predicted: float, actual: float) -> None:
        """A finished job: its prediction and the time it really ran (an observation, not truth)."""
        if predicted > 0 and actual >= 0:  # NaN predictions compare False
            self.jobs += 1
            self.predicted += predicted
            self.actual += actual

    @property
    def factor(self) -> float:
        if self.jobs < self.min_jobs or self.predicted <= 0:
            return 1.0
        return min(self.hi, max(self.lo, self.actual / self.predicted))


def predicted_remaining(job: Job, now: float, duration: float, overrun: float) -> tuple[float, bool]:
    """(predicted remaining seconds, whether the job has outrun its prediction)."""
    since = job.run_since if job.run_since >= 0 else now
    elapsed = max(0.0, now - since)
    left = duration - elapsed
    if left > 0.0:
        return left, False
    return overrun * elapsed, True


def fork_policy(policy, state: ClusterState, now: float = 0.0):
    """A copy of ``policy`` safe to run on ``state`` without touching the original, and the
    indexes it declared, made for ``state``: a policy with a ``fork(now)`` makes its own copy
    (state it observes carried over as of ``now``); other queue-order policies are stateless
    between passes (a shallow copy), the rest are deep-copied; a placement with observer
    plug-ins is rebuilt and attached to ``state``."""
    from dlsched.sched.ordering import OrderingPolicy

    fork = getattr(policy, "fork", None)
    if fork is not None:
        clone = fork(now)
    else:
        clone = copy.copy(policy) if isinstance(policy, OrderingPolicy) else _deep(policy)
    if getattr(clone, "estimator", None) is not None:
        clone.estimator = _PredictionsOnly()  # a queue that assigns keys in a pass must not teach the real one
    placer = getattr(policy, "placer", None)
    if placer is not None and getattr(placer, "observers", None):
        clone.placer = placer.fresh()
    return clone, attach_plugins(state, clone)


class _PredictionsOnly:
    """Stands in for a policy's duration estimator in the forward run: a job's expected duration
    is its copy's predicted duration; nothing is learned and the real estimator's clock is untouched."""

    def estimate(self, job: Job, now: float) -> float:
        job.pred_duration = d = _forecast_duration(job)  # a copy's "truth" is its prediction
        return d

    def priority(self, job: Job, now: float) -> float:
        job.priority = job.gpus * self.estimate(job, now)
        return job.priority

    def observe_finished(self, job: Job, now: float) -> None:
        return None


def _deep(policy):
    # the estimator (large, and never called by a pass) and the placer (rebuilt if it has an index)
    # are shared, not copied
    memo: dict = {}
    for name in ("estimator", "placer"):
        obj = getattr(policy, name, None)
        if obj is not None:
            memo[id(obj)] = obj
    return copy.deepcopy(policy, memo)


def _make_copier() -> Callable[[Job, float], Job]:
    """``copy(job, duration) -> Job``: a twin with the job's request and predictions, ``duration``
    as its (predicted) truth (:func:`~dlsched.core.truth.forecast`) and fresh runtime state.
    Generated as one function of plain attribute stores (~3x faster than a setattr loop; a refresh
    copies every job of the cluster)."""
    fields = "\n".join(f"    t.{name} = job.{name}" for name in _PUBLIC)
    src = f"""def copy(job, duration):
    t = new(Job)
{fields}
    forecast(t, duration)
    p = job._predicted  # shared as it is unless it holds priors or a failure reason (the twin has none)
    t._predicted = p if p.observed_at < 0 and p.prior_gpu_util != p.prior_gpu_util \
        and p.prior_gpu_mem_mib != p.prior_gpu_mem_mib and not p.failures and not p.last_failure \
        else Predicted(p.pred_gpu_util, p.pred_gpu_mem_mib, observed_mem_mib=p.observed_mem_mib)
    t.start_time = t.end_time = t.run_since = t.wait_since = -1.0
    t.state = CREATED
    t.preemptions = t.epoch = t.enq_seq = t.run_seq = 0
    t.queue_delay = 0.0
    t.placement = t.vc_state = None
    t.speed = 1.0
    t.attained = job.attained   # attained service carries over (LAS, SRTF-pred read it; a running twin adds its run)
    return t
"""
    scope = {"new": Job.__new__, "Job": Job, "CREATED": JobState.CREATED, "forecast": forecast,
             "Predicted": Predicted}
    exec(compile(src, "<dlsched.sched.eta copy>", "exec"), scope)  # noqa: S102 - generated from _PUBLIC only
    return scope["copy"]


_copy_job = _make_copier()


def quota_manager_of(state: ClusterState) -> QuotaManager | None:
    """The queue manager that runs on ``state`` (an observer of it), if any."""
    return next((obs for obs in state.observers if isinstance(obs, QuotaManager)), None)


def queue_specs_of(manager: QuotaManager) -> tuple[QueueSpec, ...]:
    """Every queue of ``manager``'s tree (leaves and inner queues), enough to build it again."""
    return tuple(manager.tree.specs.values())


def check_borrowing(policy, state: ClusterState) -> None:
    """The simulator's conditions for queues that borrow (``sim/engine.py``), for a forward copy
    asked to borrow: ValueError naming what stands in the way."""
    if getattr(policy, "preemptive", False):
        raise ValueError(f"queues that borrow need a non-preemptive ordering policy; {policy.name} preempts on its own")
    if state.cap != 1:
        raise ValueError("queues that borrow need exclusive GPUs (max_jobs_per_gpu = 1)")


def _copy_usage(manager: QuotaManager, source: QuotaManager | None, leaves: list[str], now: float) -> None:
    """Each queue's decayed usage at ``now`` from ``source`` (the state's own manager): a leaf's
    as it is; an inner queue's as the sum of the leaves under it (usage is additive over a
    subtree, so this holds for another tree too). Nothing runs in the copy yet: its twins add
    their rates when they start at ``now``. Without a source every queue starts from zero."""
    if source is None:
        return
    leaf = {name: source.usage[name].at(now) for name in leaves if name in source.usage}
    ancestors = manager.tree.ancestors
    for name, usage in manager.usage.items():
        usage.value = sum(v for q, v in leaf.items() if q == name or name in ancestors.get(q, ()))
        usage.t = now
        usage.rate = 0


def copy_state(state: ClusterState, cordons: bool = True) -> ClusterState:
    """An empty-queue copy of ``state``'s nodes and VCs (same global node indices, VC order,
    cordons, power and removals); the caller adds the jobs. ``cordons=False`` leaves the cordons
    to the caller (:func:`copy_cordons`), who must first restart the running jobs: a pod keeps
    running on a node cordoned after it started, and the copy's start refuses a cordoned node."""
    spec = ClusterSpec(list(state.node_specs), {vc.name: VirtualCluster(vc.name, ()) for vc in state.vcs})
    twin = ClusterState(spec, max_jobs_per_gpu=state.cap)
    for node in range(len(state.node_ids)):
        if state.node_removed[node]:
            twin.remove_node(node)
        else:
            if not state.node_powered[node]:
                twin.power_off(node)
            if cordons and state.node_cordoned[node]:
                twin.cordon(node)
    return twin


def copy_cordons(state: ClusterState, twin: ClusterState) -> None:
    """Cordon in ``twin`` the nodes that are cordoned (and present) in ``state``."""
    for node in range(len(state.node_ids)):
        if state.node_cordoned[node] and not state.node_removed[node]:
            twin.cordon(node)


class EtaEstimator:
    """Forward simulations of a state under one policy: ``estimate(state, now)`` -> :class:`EtaResult`.

    ``predict(job) -> seconds`` is used for jobs without a prediction of their own (default: the
    mean of the predictions the state holds, else ``default_duration``); a :class:`Calibration`
    scales every prediction. ``overrun``: see the
    module docstring. ``max_events``: a bound on the forward run's finish events (the jobs not
    started by then get ``inf``; None: no bound). ``duration_of(job) -> seconds`` replaces every
    prediction: only the accuracy experiment uses it, with the true durations, to tell how much of
    the error comes from predictions and how much from what the forward run cannot know.
    ``queues``/``half_life``: the queues of the forward run (None: those of the manager running
    on the state; see the module docstring); ``preemption_overhead(job)``: seconds a twin
    preempted in the forward run redoes."""

    def __init__(self, policy, predict: Callable[[Job], float] | None = None, overrun: float = 0.5,
                 default_duration: float = 3600.0, max_events: int | None = None,
                 duration_of: Callable[[Job], float] | None = None,
                 calibration: Calibration | None = None, resubmit: bool = False,
                 queues: tuple[QueueSpec, ...] | None = None, half_life: float | None = None,
                 preemption_overhead: Callable[[Job], float] | None = None) -> None:
        if not overrun >= 0:
            raise ValueError(f"overrun must be >= 0, got {overrun}")
        self.policy = policy
        self.predict = predict
        self.duration_of = duration_of   # replaces every prediction (experiments' true-duration diagnostic)
        self.calibration = calibration   # scales every prediction (None: as predicted)
        self.overrun = float(overrun)
        self.default_duration = float(default_duration)
        self.max_events = max_events
        # the copy's policy is not the one that queued the jobs (a what-if, sched/whatif.py): its
        # submission hook gives each waiting twin its own keys (QSSF's priority) from predictions
        self.resubmit = resubmit
        # None: the queues the state runs (its QuotaManager, if any); a tuple: these instead
        # (``()``: fixed VCs); half_life: theirs (None: the state manager's, else the default)
        self.queues = None if queues is None else tuple(queues)
        self.half_life = half_life
        self.preemption_overhead = preemption_overhead   # seconds a reclaimed twin redoes

    def _durations(self, jobs: Iterable[Job]) -> tuple[dict[Job, float], int]:
        if self.duration_of is not None:
            return {job: float(self.duration_of(job)) for job in jobs}, 0
        out: dict[Job, float] = {}
        missing: list[Job] = []
        for job in jobs:
            d = job.pred_duration
            if d >= 0:  # NaN (no prediction) compares False
                out[job] = float(d)
            else:
                missing.append(job)
        if missing:
            if self.predict is not None:
                for job in missing:
                    out[job] = max(0.0, float(self.predict(job)))
            else:
                fallback = sum(out.values()) / len(out) if out else self.default_duration
                for job in missing:
                    out[job] = fallback
        factor = self.calibration.factor if self.calibration is not None else 1.0
        if factor != 1.0:
            out = {job: d * factor for job, d in out.items()}
        return out, len(missing)

    def estimate(self, state: ClusterState, now: float, only: Iterable[Job] | None = None) -> EtaResult:
        """ETAs at ``now`` of every waiting job of ``state`` (or of those in ``only``)."""
        return self.snapshot(state, now, only).run()

    def snapshot(self, state: ClusterState, now: float, only: Iterable[Job] | None = None) -> ForwardRun:
        """Copy what the forward run needs from ``state`` (the live service holds its lock for this
        part only; :meth:`ForwardRun.run` touches nothing of the original)."""
        running = [j for vc in state.vcs for j in vc.running]
        waiting = sorted((j for vc in state.vcs for j in vc.queue), key=lambda j: j.enq_seq)
        durations, unpredicted = self._durations([*running, *waiting])
        twin = copy_state(state, cordons=False)   # cordoned after the running jobs restart below
        policy, indexes = fork_policy(self.policy, twin, now)
        quotas = self._quotas(state, twin, policy, now)
        new_queue = policy.new_queue
        for vc in twin.vcs:
            vc.queue = new_queue()
        run = ForwardRun(twin, policy, now, EtaResult(now, unpredicted=unpredicted), self.max_events, indexes)
        run.quotas = quotas
        run.overhead = self.preemption_overhead
        hosts = state.hosts
        twin.begin(now)
        heap = run.heap
        shared = twin.cap > 1
        vcs = twin.vcs
        submit, start, overrun = twin.submit, twin.start, self.overrun
        for job in running:
            left, over = predicted_remaining(job, now, durations[job], overrun)
            run.result.overrun += over
            twin_job = _copy_job(job, left)
            twin_job.attained = job.attained_at(now)   # its runs so far, this one included (it restarts at now)
            twin_job.vc_state = vcs[job.vc_state.vid]
            submit(twin_job, now)
            host = hosts.get(job) if hosts else None
            if host is None:
                start(twin_job, job.placement, now, shared)
            else:   # it runs on GPUs another VC lends: the same loan in the copy
                twin.start_borrowed(twin_job, vcs[host.vid], job.placement, now)
                if quotas is not None:
                    quotas.adopt(twin_job)
            run.seq += 1
            heap.append((now + left, run.seq, twin_job, twin_job.epoch))
        copy_cordons(state, twin)
        heapq.heapify(heap)
        origin = run.origin
        on_submit = getattr(policy, "job_submitted", None) if self.resubmit else None
        for job in waiting:
            twin_job = _copy_job(job, durations[job])
            twin_job.vc_state = vcs[job.vc_state.vid]
            if on_submit is not None:
                on_submit(twin_job, now)
            submit(twin_job, now)
            origin[twin_job] = job
        run.wanted = set(only) if only is not None else None
        return run

    def _quotas(self, state: ClusterState, twin: ClusterState, policy, now: float) -> QuotaManager | None:
        """The copy's queue manager (made before any twin is submitted, so that it observes them
        all), or None: fixed VCs with no job on borrowed GPUs."""
        source = quota_manager_of(state)
        if self.queues is None:
            specs = queue_specs_of(source) if source is not None else ()
        else:
            specs = self.queues
        may_borrow = bool(specs) and borrowing_possible(specs)
        if not may_borrow and not state.hosts:
            return None
        if may_borrow and self.queues is not None:   # the state's own manager was checked by its driver
            check_borrowing(policy, state)
        half_life = self.half_life or (source.half_life if source is not None else DEFAULT_HALF_LIFE)
        manager = QuotaManager(specs, twin, half_life)   # ValueError: a queue that names no VC, a cycle
        _copy_usage(manager, source, [vc.name for vc in state.vcs], now)
        return manager


class _ForwardStarts:
    """The forward run's backend: a start schedules the twin's predicted finish and, for a
    waiting job's twin, records its ETA; a preempted twin keeps the work it did, and its
    scheduled finish goes stale (its epoch)."""

    __slots__ = ("run", "left_to_start", "postponed")

    def __init__(self, run: ForwardRun) -> None:
        self.run = run
        origin, wanted = run.origin, run.wanted
        self.left_to_start = len(origin) if wanted is None else sum(1 for j in origin.values() if j in wanted)
        self.postponed = None   # the queue manager's borrowed starts and reclaims reach it too

    def started(self, decision: Start, t: float) -> None:
        job = decision[0]
        run = self.run
        run.result.starts += 1
        run.seq += 1
        heapq.heappush(run.heap, (t + _forecast_left(job), run.seq, job, job.epoch))
        first = run.origin.pop(job, None)
        if first is not None:
            run.result.eta[first] = t
            if run.wanted is None or first in run.wanted:
                self.left_to_start -= 1

    def preempted(self, decision: Preempt, moved, t: float) -> None:
        job = decision[0]
        # the forward run's physics: twins run at solo speed; the work done so far is kept, and
        # the checkpoint's cost redone when the estimator was told one
        left = _forecast_left(job) - (t - job.run_since)
        left = left if left > 0.0 else 0.0
        overhead = self.run.overhead
        if overhead is not None:
            left += overhead(job)
        _book_left(job, left)
        job.run_since = t


class ForwardRun:
    """A copied state and policy, ready to run forward until every waiting job has started."""

    def __init__(self, twin: ClusterState, policy, now: float, result: EtaResult, max_events: int | None,
                 indexes: dict | None = None) -> None:
        self.twin = twin
        self.indexes = indexes or {}         # the twin's plug-in indexes (fork_policy made them)
        self.policy = policy
        self.now = now
        self.result = result
        self.max_events = max_events
        self.heap: list[tuple[float, int, Job, int]] = []
        self.seq = 0
        self.origin: dict[Job, Job] = {}     # twin -> the real waiting job
        self.wanted: set[Job] | None = None
        self.quotas: QuotaManager | None = None            # the copy's queue manager (queues that borrow)
        self.overhead: Callable[[Job], float] | None = None  # seconds a preempted twin redoes

    def run(self) -> EtaResult:
        """The event loop of the forward run: finishes and policy timers, then one pass per VC
        that changed and the queue manager's borrowing and reclaim (as :mod:`dlsched.sim.engine`
        orders an instant); no arrivals."""
        twin, policy, result, origin, wanted = self.twin, self.policy, self.result, self.origin, self.wanted
        heap = self.heap
        view = SchedulingView(twin, getattr(policy, "oracle", False), indexes=self.indexes)
        starts = _ForwardStarts(self)
        decider = Decider(twin, view, policy, starts)   # the kernel's one dispatcher
        dirty, woken = decider.dirty, decider.woken
        quotas = self.quotas
        dirty.update((vc, None) for vc in twin.vcs if vc.pending)
        timers: list[tuple[float, int, int]] = []
        t = self.now
        max_events = self.max_events if self.max_events is not None else INF
        idle = 0   # a policy that keeps asking for wake-ups while nothing runs must not loop forever
        while starts.left_to_start:
            view.now = t
            starts_before = result.starts
            changed = bool(dirty)
            decider.decide(t)   # clears dirty and woken
            if quotas is not None and changed:
                quotas.rebalance(decider, t)   # its starts and reclaims reach _ForwardStarts
            for t1, vid in view._wakeups:
                if t1 > t:
                    self.seq += 1
                    heapq.heappush(timers, (t1, self.seq, vid))
            view._wakeups.clear()
            idle = idle + 1 if not heap and result.starts == starts_before else 0
            t_fin = heap[0][0] if heap else INF
            t_tim = timers[0][0] if timers else INF
            t = min(t_fin, t_tim)
            if t == INF or result.events >= max_events or idle > IDLE_TIMER_LIMIT:
                break
            while heap and heap[0][0] == t:
                _, _, job, epoch = heapq.heappop(heap)
                if epoch != job.epoch or job.state is not _RUNNING:
                    continue
                host = twin.hosts.get(job) if twin.hosts else None
                twin.finish(job, t)
                result.events += 1
                dirty[job.vc_state] = None
                if host is not None:   # a borrowed job freed the lender's GPUs
                    dirty[host] = None
            while timers and timers[0][0] == t:
                vc = twin.vcs[heapq.heappop(timers)[2]]
                dirty[vc] = None
                woken.add(vc)
        for job in origin.values():  # never started in the forward run
            if wanted is None or job in wanted:
                result.eta[job] = INF
        if wanted is not None:
            result.eta = {j: e for j, e in result.eta.items() if j in wanted}
        return result
