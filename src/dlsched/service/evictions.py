"""Live preemption, the core's side: which pods are being evicted, and which evicted jobs wait
for the pod their controller creates again.

A policy's ``Preempt`` comes back from the kernel as an ``Evict`` action (``assume=True``: the job
keeps its GPUs). The core writes an eviction *intent* to the store and hands it to the
:class:`~dlsched.service.evictor.Evictor`, which calls the Eviction API off the core's lock. The
job keeps its GPUs while its pod checkpoints (its grace period) and is stopped (``JobEvicted``:
its attained GPU-seconds booked, the eviction counted) when the pod is gone. A bare pod is gone
for good; a pod a controller (Job, JobSet, ReplicaSet) owns comes back as a new pod, which is
matched to the evicted job by :func:`match_key` so that the job keeps its queue entry, attained
service, eviction count and submit time.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from dlsched.core.job import Job
from dlsched.service.pods import PodFacts

JOB_LABEL = "dlsched.io/job"                   # pods of one job share its value (the match rule's first form)
GRACE_ANNOTATION = "dlsched.io/grace-seconds"  # the pod's grace period for an eviction (else the policy's)
DEFAULT_GRACE_S = 30                           # Kubernetes' own default terminationGracePeriodSeconds
MAX_GRACE_S = 86_400
AWAITING_KEPT = 10_000                         # evicted jobs remembered while their replacement is due


@dataclass(frozen=True, slots=True)
class Intent:
    """One eviction to carry out: what the store recorded before any API call."""

    intent_id: int
    uid: str
    namespace: str
    name: str
    for_pod: str
    reason: str
    grace_s: int


def match_key(pod: PodFacts) -> tuple[str, ...] | None:
    """What ties a controller's new pod to the evicted one: the ``dlsched.io/job`` label (same
    namespace and value), else the owner's uid and the pod name's prefix (``generateName``: a
    Job's pods are ``NAME-`` plus a random suffix; an indexed Job's ``NAME-INDEX-``). None for a
    pod with neither (a bare pod: a new pod of that name is a new job)."""
    value = pod.labels.get(JOB_LABEL)
    if isinstance(value, str) and value:
        return ("label", pod.namespace, value)
    if pod.owner_uid and pod.generate_name:
        return ("owner", pod.namespace, pod.owner_uid, pod.generate_name)
    return None


def grace_of(pod: PodFacts, default: int) -> tuple[int, bool]:
    """The pod's grace period (its ``dlsched.io/grace-seconds`` annotation, whole seconds in
    0..86400), else ``default``; and whether an annotation was there but unusable."""
    text = pod.annotations.get(GRACE_ANNOTATION)
    if text is None:
        return default, False
    text = str(text).strip()
    if text.isdigit() and int(text) <= MAX_GRACE_S:
        return int(text), False
    return default, True


def policy_grace(policy, fallback: int = DEFAULT_GRACE_S) -> int:
    """The policy's default grace period: its preemption guard's ``grace_s`` (``--param grace_s``,
    sched/preemption.py) when set above 0, else 30 s."""
    guard = getattr(policy, "guard", None)
    value = getattr(guard, "grace_s", None) if guard is not None else getattr(policy, "grace_s", None)
    if isinstance(value, (int, float)) and 0 < value <= MAX_GRACE_S:
        return int(value)
    return fallback


class EvictionBook:
    """The evictions the core knows of: in flight (uid -> intent id, until the pod is gone), the
    pods of those seen terminating, and evicted jobs waiting for their replacement pod."""

    def __init__(self) -> None:
        self.inflight: dict[str, int] = {}
        self.terminating: set[str] = set()
        self.awaiting: OrderedDict[tuple, Job] = OrderedDict()
        self.resume: list[dict] = []   # pending intents found in the store at start-up

    def replaced_by(self, pod: PodFacts, pods: dict[str, PodFacts]) -> str | None:
        """The uid of an in-flight eviction whose pod ``pod`` replaces (the old pod still
        checkpoints), or None."""
        key = match_key(pod)
        if key is None:
            return None
        for uid in self.inflight:
            old = pods.get(uid)
            if old is not None and old.uid != pod.uid and match_key(old) == key:
                return uid
        return None

    def keep(self, key: tuple, job: Job) -> None:
        """An evicted job whose pod is gone waits for a new pod with ``key``."""
        self.awaiting[key] = job
        self.awaiting.move_to_end(key)
        while len(self.awaiting) > AWAITING_KEPT:
            self.awaiting.popitem(last=False)
