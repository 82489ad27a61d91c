"""Live preemption carried out: a policy's ``Evict`` action becomes an intent in the store and
a call of the Eviction API (off the lock, :mod:`dlsched.service.evictor`); the pod's end is the
job's ``JobEvicted``; the pod its controller creates again takes the evicted job over. The book
of evictions in flight is :class:`~dlsched.service.evictions.EvictionBook`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from dlsched.core.job import Job, JobState
from dlsched.kernel.stimuli import TIME_LIMIT_REASON, Evict, JobEvicted, JobSubmitted, JobWithdrawn
from dlsched.service.evictions import EvictionBook, Intent, grace_of, match_key, policy_grace
from dlsched.service.host import LiveHost
from dlsched.service.pods import PodFacts

PENDING, RUNNING, ASSUMED = JobState.PENDING, JobState.RUNNING, JobState.ASSUMED


class LiveEvictions:
    """Evictions decided live, from the intent to the re-created pod."""

    def __init__(self, host: LiveHost) -> None:
        self.host = host
        self.book = EvictionBook()              # evictions in flight, evicted jobs awaiting their new pod
        self.evictor: Callable[[Intent], None] | None = None   # hands an intent to the Eviction API caller
        self.default_grace = policy_grace(host.policy)   # seconds, when a pod has no dlsched.io/grace-seconds

    def evict(self, action: Evict, now: float) -> None:
        """A preemption decided live: the intent goes to the store first (a restart completes it,
        never decides it twice), then to the evictor. The job keeps its GPUs until its pod is
        gone. An eviction in flight is not asked for again; a nomination is simply withdrawn."""
        host, pods = self.host, self.host.book.pods
        job = action.job
        uid = job.job_id
        book = self.book
        if uid in book.inflight:
            host.counters["evictions already in flight"] += 1
            return
        if job.state is ASSUMED:   # not bound yet: nothing to evict, the nomination goes back
            host.forget(job, f"preempted before its bind: {action.reason}")
            host.counters["nominations withdrawn by a preemption"] += 1
            return
        if job.state is not RUNNING or uid not in pods:
            return
        pod = pods[uid]
        for_job = action.for_job or self.evicted_for(job)
        for_pod = pods[for_job.job_id].key if for_job is not None and for_job.job_id in pods else ""
        grace, bad = grace_of(pod, self.default_grace)
        if bad:
            host.counters["bad grace-seconds annotations"] += 1
        intent_id = host.store.evict_intent(uid, pod.key, for_pod, action.reason, grace, now)
        book.inflight[uid] = intent_id
        host.counters["evictions requested"] += 1
        host.record("evict", uid=uid, pod=pod.key, **{"for": for_pod}, why=action.reason, grace_s=grace)
        intent = Intent(intent_id, uid, pod.namespace, pod.name, for_pod, action.reason, grace)
        if self.evictor is not None:
            self.evictor(intent)
        else:
            host.counters["evictions without an API server"] += 1

    def evicted_for(self, job: Job) -> Job | None:
        """The pending job a preemption makes room for, when the decision does not say: the
        first in the policy's order of the evicted job's VC."""
        return min(job.vc_state.queue, key=self.host.rank, default=None)

    def evicting_pod_seen(self, pod: PodFacts) -> PodFacts | None:
        """A pod being evicted: while it checkpoints (deletion pending, not yet Failed or
        Succeeded) it keeps its GPUs, so it is read as running; Failed: it is gone (the job is
        evicted); Succeeded: it finished first (the normal end). None when nothing else is to do."""
        if pod.phase == "Failed":
            job = self.host.book.jobs.get(pod.uid)
            if job is not None:
                self.evicted(job, "pod failed after its eviction")
            return None
        if pod.phase == "Succeeded":
            self.book.inflight.pop(pod.uid, None)
            self.book.terminating.discard(pod.uid)
            self.host.limits.stopping.discard(pod.uid)   # it finished before its stop at the limit
            return pod
        if pod.deleting:
            self.book.terminating.add(pod.uid)
            return replace(pod, deleting=False)
        return pod

    def evicted(self, job: Job, why: str) -> None:
        """The evicted pod is gone: the kernel stops the job (``JobEvicted``: attained service
        booked, re-queued); it then waits out of the queue for the pod its controller creates
        again (:func:`match_key`), or ends when nothing will (a bare pod)."""
        host = self.host
        now = host.now()
        uid = job.job_id
        pod = host.book.pods[uid]
        self.book.inflight.pop(uid, None)
        self.book.terminating.discard(uid)
        if uid in host.limits.stopping:   # an eviction at its time limit: the job ends (JobTimedOut)
            host.end(job, pod, why)
            self.resubmit_parked(pod)
            return
        if job.state is RUNNING:
            host.handle(JobEvicted(job), now)
        host.store.release(uid, pod.key, "preempted", now, detail=why)
        host.record("evicted", uid=uid, why=why)
        key = match_key(pod)
        if key is None or job.state is not PENDING:
            host.counters["evicted pods without a controller (ended)"] += 1
            if job.state is PENDING:
                host.end(job, pod, f"{why}; no controller re-creates it")
            return
        host.handle(JobWithdrawn(job, f"{why}; waiting for its controller's new pod"), now)
        host.book.drop(uid, pod.key)
        host.noms.slots.pop(uid, None)
        self.book.keep(key, job)
        host.counters["evicted jobs awaiting their new pod"] += 1
        self.resubmit_parked(pod)

    def resubmit_parked(self, pod: PodFacts) -> None:
        """Pods parked as the replacement of ``pod`` while it checkpointed are submitted now."""
        key, host = match_key(pod), self.host
        if key is None:
            return
        for _other, waiting in list(host.book.parked.items()):   # a new pod seen while this one checkpointed
            if match_key(waiting) == key and not waiting.node_name:
                host.submit(waiting)

    def replaces(self, pod: PodFacts) -> bool:
        """A new pending pod: the replacement of an evicted job (it takes the job over: queue
        entry, attained service, eviction count, submit time), or of a pod still checkpointing
        (parked until that one is gone). False: an ordinary new pod."""
        book, host = self.book, self.host
        if not (book.inflight or book.awaiting):
            return False
        pods = host.book.pods
        old = book.replaced_by(pod, pods)
        if old is not None:
            host.book.park(pod, f"replaces {pods[old].key}, which is being evicted (grace period)")
            return True
        key = match_key(pod)
        job = book.awaiting.pop(key, None) if key is not None else None
        if job is None:
            return False
        now = host.now()
        host.book.unpark(pod.uid)
        previous = job.job_id
        job.job_id = pod.uid   # its name (the duration key) is the evicted pod's: the same job
        host.limits.carried(job, pod)   # its time limit: the new pod's (a deadline counts from its start)
        host.book.add(pod, job)
        host.handle(JobSubmitted(job), now)
        host.counters["evicted jobs re-queued"] += 1
        host.store.log("requeue", pod.uid, pod.key, now,
                       detail=f"replaces evicted {previous}: attained {job.attained:.1f} GPU-s, "
                              f"evictions {job.preemptions}")
        host.record("requeue", uid=pod.uid, pod=pod.key, replaces=previous, attained=job.attained,
                    evictions=job.preemptions, submit_time=job.submit_time)
        return True

    def load(self, rows: list[dict]) -> None:
        """At start-up, before the pods are listed: the store's intents whose pods may still be
        there, so that their deletion reads as an eviction and none is asked for again."""
        for row in rows:
            self.book.inflight[row["pod_uid"]] = row["id"]
            if row["reason"] == TIME_LIMIT_REASON:   # a stop at the time limit: it ends, is not re-queued
                self.host.limits.stopping.add(row["pod_uid"])
            if row["state"] == "pending":
                self.book.resume.append(row)

    def resume(self) -> tuple[int, int]:
        """After the pods are listed: a pending intent whose pod still runs is handed to the
        evictor (once, under its own id); one whose pod is gone is marked done. Intents of pods
        not listed are dropped from the book. Returns (resumed, closed)."""
        book, host = self.book, self.host
        resumed = closed = 0
        now = host.now()
        for row in book.resume:
            uid = row["pod_uid"]
            job = host.book.jobs.get(uid)
            if job is not None and job.state is RUNNING and uid not in book.terminating:
                pod = host.book.pods[uid]
                intent = Intent(row["id"], uid, pod.namespace, pod.name, row["for_pod"], row["reason"],
                                int(row["grace_s"]))
                if self.evictor is not None:
                    self.evictor(intent)
                    resumed += 1
                    continue
            host.store.evict_done(row["id"], "the pod was gone or terminating at restart: not sent", now)
            closed += 1
        book.resume.clear()
        for uid in [u for u in book.inflight if u not in host.book.jobs]:
            del book.inflight[uid]
        host.counters["eviction intents resumed at start-up"] += resumed
        return resumed, closed

    def sent(self, intent: Intent, outcome: str) -> None:
        """The evictor's report: the Eviction API accepted (or the pod was gone)."""
        self.host.counters[f"evictions {outcome}"] += 1
        self.host.store.evict_done(intent.intent_id, outcome, self.host.now())
