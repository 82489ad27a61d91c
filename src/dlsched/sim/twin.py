"""A twin of a kernel state, for a forecast (:mod:`dlsched.sim.forecast`): the same nodes, VCs,
cordons, power and GPU-sharing cap, copies of the jobs that keep only their request and
predictions, and a copy of the policy that may run on the twin without touching the original.

A twin job's "truth" is the prediction the forecast gives it (:func:`~dlsched.core.truth.forecast`):
nothing of the original's ground truth is read. A policy that keeps state observed from the kernel
(``fairshare``'s per-user usage) may define ``fork(now)``: the copy it returns carries that state as
of ``now`` and observes the twin from then on (the original learns nothing from the copy).
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from dlsched.core.cluster import ClusterSpec, VirtualCluster
from dlsched.core.job import Job, JobState, Predicted
from dlsched.core.truth import duration as _forecast_duration
from dlsched.core.truth import forecast
from dlsched.kernel.queue_tree import borrowing_blocker
from dlsched.kernel.quotas import QueueSpec, QuotaManager
from dlsched.kernel.state import ClusterState
from dlsched.sched.indexes import attach_plugins

# what a copy keeps of a job: its request and predictions (what a policy may read)
_PUBLIC = ("index", "job_id", "user", "name", "gpus", "submit_time", "_spec", "pred_duration",
           "priority")  # _spec: the shared rest of the request (VC and time limit included)


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
    """Stands in for a policy's duration estimator in a forecast: a job's expected duration is
    its twin's predicted duration; nothing is learned and the real estimator's clock is untouched."""

    def estimate(self, job: Job, now: float) -> float:
        job.pred_duration = d = _forecast_duration(job)  # a twin's "truth" is its prediction
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
    t._predicted = p if p.observed_at < 0 and p.prior_gpu_util != p.prior_gpu_util \\
        and p.prior_gpu_mem_mib != p.prior_gpu_mem_mib and not p.failures and not p.last_failure \\
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
    exec(compile(src, "<dlsched.sim.twin copy>", "exec"), scope)  # noqa: S102 - generated from _PUBLIC only
    return scope["copy"]


copy_job = _make_copier()


def quota_manager_of(state: ClusterState) -> QuotaManager | None:
    """The queue manager that runs on ``state`` (an observer of it), if any."""
    return next((obs for obs in state.observers if isinstance(obs, QuotaManager)), None)


def queue_specs_of(manager: QuotaManager) -> tuple[QueueSpec, ...]:
    """Every queue of ``manager``'s tree (leaves and inner queues), enough to build it again."""
    return tuple(manager.tree.specs.values())


def check_borrowing(policy, state: ClusterState) -> None:
    """The simulator's conditions for queues that borrow (``sim/engine.py``), for a twin asked to
    borrow: ValueError naming what stands in the way."""
    blocker = borrowing_blocker(policy, state.cap)
    if blocker:
        raise ValueError(blocker)


def copy_usage(manager: QuotaManager, source: QuotaManager | None, leaves: list[str], now: float) -> None:
    """Each queue's decayed usage at ``now`` from ``source`` (the state's own manager): a leaf's
    as it is; an inner queue's as the sum of the leaves under it (usage is additive over a
    subtree, so this holds for another tree too). Nothing runs in the twin yet: its jobs add
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
