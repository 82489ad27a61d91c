"""Time limits live: a pod's max runtime, and who stops it there.

A pod's limit (``Job.time_limit_s``) is its ``dlsched.io/time-limit-seconds`` annotation when it
has one (seconds of dlsched's run time, counted across evictions; dlsched enforces it), else its
``spec.activeDeadlineSeconds`` (the Kubernetes convention: the kubelet fails the pod with reason
``DeadlineExceeded`` that many seconds after the pod's own start). A pod with neither has no
limit. The live kernel arms a ``("limit", uid)`` timer at each start (:class:`LimitClock`) and,
when it fires, returns ``Evict(job, "time limit")``; :class:`LiveLimits` decides who carries it
out: a deadline that a kubelet counts (the pod has a ``status.startTime``) is left to the
kubelet; anything else -- the annotation, or a deadline on a node without a kubelet -- goes
through the eviction path (intent in the store first, grace period, event, decision log). Either
way the pod's end is the job's ``JobTimedOut`` (``StopReason.TIME_LIMIT``), a ``time_limit``
entry in the decision log and in ``/metrics``' ``dlsched_decisions``. docs/service.md.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

from dlsched.core.job import Job
from dlsched.kernel.limits import LimitClock
from dlsched.kernel.stimuli import LIMIT_TIMER, Evict, Timer
from dlsched.service.host import LiveHost
from dlsched.service.pods import DEADLINE, DEADLINE_EXCEEDED, TIME_LIMIT_ANNOTATION, PodFacts, pod_limit


def ran_before(pod: PodFacts, now: float) -> float | None:
    """Seconds an adopted pod had run when found (a restart of this service, or a pod bound by
    someone else), so that its limit counts from its original start: since ``status.startTime``
    (a kubelet's start) or else its bind (the ``PodScheduled`` condition's time). None: neither
    is known (the limit then counts from the adoption). A time ahead of ``now`` (clock skew)
    counts as 0."""
    since = pod.started or pod.scheduled
    if not since:
        return None
    return max(0.0, now - since)


def limit_clock(actions: Callable[[], list]) -> LimitClock:
    """The live kernel's limit clock: each start of a limited job appends a ``Timer`` action
    for its limit to the actions the kernel is returning (``actions()``: the live list)."""
    def arm(time: float, key: tuple, job: Job) -> None:
        actions().append(Timer(time, key))
    return LimitClock(arm)


class LiveLimits:
    """Who stops a live job at its limit, and which evictions are stops at a limit."""

    def __init__(self, host: LiveHost) -> None:
        self.host = host
        self.stopping: set[str] = set()   # uids whose eviction in flight is at their time limit
        self.timers: list[tuple[float, tuple]] = []   # the passes' timer heap (service/passes.py sets it)

    def arm(self, actions: list) -> None:
        """Limit timers among the actions of a stimulus handled outside a pass (an adoption's
        start arms one): onto the passes' timer heap, else they would be lost with the actions."""
        for action in actions:
            if type(action) is Timer and action.key[0] == LIMIT_TIMER:
                heapq.heappush(self.timers, (action.time, action.key))

    def due(self, action: Evict, now: float) -> None:
        """The kernel's ``Evict(job, "time limit")``: left to the kubelet where one counts the
        pod's deadline, else carried out through the eviction path."""
        host = self.host
        job = action.job
        pod = host.book.pods.get(job.job_id)
        if pod is None:
            return
        _, source, _ = pod_limit(pod)
        if source == DEADLINE and pod.started:
            host.counters["time limits left to the kubelet (activeDeadlineSeconds)"] += 1
            host.record("limit_due", uid=job.job_id, pod=pod.key, by="kubelet")
            return
        self.stopping.add(job.job_id)
        host.counters["time limits enforced by eviction"] += 1
        host.evictions.evict(action, now)

    def timed_out(self, job: Job, pod: PodFacts) -> bool:
        """Whether the running job's pod ended at its time limit: failed ``DeadlineExceeded``,
        or gone after dlsched's eviction at the limit."""
        return job.job_id in self.stopping or (pod.phase == "Failed" and pod.reason == DEADLINE_EXCEEDED)

    def why(self, job: Job, pod: PodFacts) -> str:
        """The decision log's detail of a stop at the limit."""
        limit = job.time_limit_s
        shown = f"{limit:g} s" if limit is not None else "its deadline"
        if job.job_id in self.stopping:
            return f"stopped by dlsched at its time limit ({shown} of run time, {TIME_LIMIT_ANNOTATION} " \
                   f"or activeDeadlineSeconds on a node without a kubelet)"
        return f"the kubelet stopped it at its activeDeadlineSeconds ({pod.deadline_s} s): {DEADLINE_EXCEEDED}"

    def carried(self, job: Job, pod: PodFacts) -> None:
        """A controller's new pod takes an evicted job over: its limit is the new pod's. An
        annotation counts dlsched's run time across evictions (the same total); a deadline
        counts from the new pod's start, so it is added to the run time the job already had."""
        limit, source, _ = pod_limit(pod)
        if source == DEADLINE:
            limit = job.attained / job.gpus + limit if job.gpus else limit
        job.time_limit_s = limit
