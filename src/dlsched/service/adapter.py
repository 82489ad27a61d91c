"""The live adapter: what the API server says of pods and nodes, and the outcomes of binds,
become calls of the kernel's one entry point (:meth:`dlsched.kernel.entry.Kernel.handle`,
``assume=True``): a new pod ``JobSubmitted``, a bind's outcome ``BindSucceeded`` /
``BindFailed``, an ended pod ``JobFinished`` or ``JobWithdrawn``, a node's change
``NodeChanged``, a pod bound outside this process ``JobAdopted``. Every stimulus is recorded
first, so ``dlsched replay --stimuli`` can feed it through the same entry point.

It implements the small interface (:class:`~dlsched.service.host.LiveHost`) that its parts are
given: the pod book, the nominations, gangs, live evictions and the reasons a pod waits.
The facade (:class:`dlsched.service.core.SchedulerCore`) holds the lock around it all.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from dlsched.core.cluster import GpuType, NodeSpec, gpu_type
from dlsched.core.job import Job, JobState
from dlsched.kernel.stimuli import (
    BindFailed,
    BindSucceeded,
    GpuTypeChanged,
    JobFinished,
    JobSubmitted,
    JobTimedOut,
    JobWithdrawn,
    NodeChanged,
    Stimulus,
)
from dlsched.service.adoption import bound_pod
from dlsched.service.gangs import GangTable, is_gang_id
from dlsched.service.kernel_setup import live_kernel
from dlsched.service.live_evictions import LiveEvictions
from dlsched.service.live_limits import LiveLimits
from dlsched.service.memory_kept import MemoryKept
from dlsched.service.nominations import BindError, Nominations
from dlsched.service.podbook import PodBook, job_of
from dlsched.service.pods import NodeFacts, PodFacts, VcMapping
from dlsched.service.reasons import Reasons
from dlsched.service.record import stimulus_fields
from dlsched.service.store import Store

PENDING, RUNNING, ASSUMED = JobState.PENDING, JobState.RUNNING, JobState.ASSUMED


class Adapter:
    """Pods, nodes and binds -> kernel stimuli; the parts' host (:class:`LiveHost`)."""

    def __init__(self, policy, store: Store, vcs: VcMapping, max_jobs_per_gpu: int,
                 clock: Callable[[], float] = time.time, default_gpu: GpuType | None = None,
                 predict: Callable[[Job], None] | None = None, recorder=None) -> None:
        self.policy = policy
        self.store = store
        self.vcs = vcs
        self.clock = clock
        self.default_gpu = default_gpu or GpuType()
        self.predict = predict     # fills a new job's predicted GPU utilisation / memory from its model
        self.recorder = recorder   # the replayable event log (dlsched.service.record), or None
        self.book = PodBook()
        # the kernel's entry point, with starts assumed (a nomination until the bind succeeds), built
        # by the set-up code that a replay of the log uses too (service/kernel_setup.py)
        self.kernel, self.restricted = live_kernel(policy, max_jobs_per_gpu, self.book.offered)
        self.state, self.view = self.kernel.state, self.kernel.view
        self.counters: Counter[str] = Counter()
        self.passes = 0
        self.last_now = 0.0
        self.noms = Nominations(self.state, store, self.book, policy.name, self.record)
        self.gangs = GangTable(self)   # gang hook: the pods of one distributed job (service/gangs.py)
        self.gangs.wrap_placement()    # gang hook: a gang's placement as its pods
        self.evictions = LiveEvictions(self)   # preemptions carried out through the Eviction API
        self.limits = LiveLimits(self)         # time limits: left to the kubelet, or stopped by eviction
        self.reasons = Reasons(self)           # why a pod waits (the filter's and the queue's reason)
        self.memory = MemoryKept(store, predict, self.counters)   # corrected memory, kept across restarts

    # -- the kernel --------------------------------------------------------------------
    def now(self) -> float:
        """Wall-clock seconds, never going backwards (the kernel's clock only moves forward)."""
        t = self.clock()
        if t > self.last_now:
            self.last_now = t
        return self.last_now

    def record(self, kind: str, **fields: object) -> None:
        if self.recorder is not None:
            self.recorder.write(kind, self.last_now, **fields)

    def handle(self, stimulus: Stimulus, now: float | None = None) -> list:
        """Hand one stimulus to the kernel (recorded first, for replay); returns its actions."""
        now = self.now() if now is None else now
        if self.recorder is not None:
            self.recorder.write("stimulus", now, **stimulus_fields(stimulus, self.state))
        return self.kernel.handle(stimulus, now)

    def mark(self, vid: int) -> None:
        """VC ``vid`` changed: the next pass decides it."""
        self.kernel.mark(vid)

    def why_waiting(self, uid: str) -> str:
        return self.reasons.why_waiting(uid)

    def rank(self, job: Job) -> tuple:
        return self.reasons.rank(job)

    def new_job(self, pod: PodFacts, vc: str) -> Job:
        """The pod's kernel job, with the memory correction a run before this one kept for it."""
        job = job_of(pod, vc, self.now, self.predict, self.counters)
        self.memory.apply(job)
        return job

    # -- nodes -----------------------------------------------------------------------------
    def node_seen(self, node: NodeFacts) -> None:
        st, now = self.state, self.now()
        idx = st.node_index.get(node.name)
        gtype, known = self.gpu_type_of(node)
        if idx is not None:
            spec = st.node_specs[idx]
            reshaped = spec.gpus != node.gpus or spec.vc != node.vc
            if reshaped and not st.node_holders[idx]:
                self.handle(NodeChanged("removed", idx), now)
                idx = None
            else:
                if reshaped:
                    self.counters["node changes deferred while busy"] += 1
                if spec.gpu_type != gtype:
                    # a type or memory label changed: applied at once, busy or not (the old
                    # figure would let co-located pods overfill the node's GPUs)
                    self.handle(GpuTypeChanged(idx, gtype), now)   # recorded: replay --stimuli follows it
                    self.counters["node GPU types or memory changed in place"] += 1
        if idx is None:
            if node.gpus == 0:
                self.counters["nodes without GPUs ignored"] += 1
                self.book.not_awaited.add(node.name)   # known: a filter naming it waits for nothing
                return
            self.book.not_awaited.discard(node.name)
            if not known:
                self.counters["unknown GPU type labels"] += 1
            self.handle(NodeChanged("added", spec=NodeSpec(node.name, node.vc, node.gpus, gtype)), now)
            idx = st.node_index[node.name]
        self.book.gone_nodes.discard(node.name)
        spec = st.node_specs[idx]
        self.record("node", name=node.name, vc=node.vc, gpus=node.gpus, gpu_type=spec.gpu_type.name,
                    gpu_mem_mib=spec.gpu_type.memory_mib, cordoned=node.cordoned)
        if node.cordoned != st.node_cordoned[idx]:
            self.handle(NodeChanged("cordoned" if node.cordoned else "uncordoned", idx), now)
        else:
            self.mark(st.node_vc[idx])
        self.retry_parked()

    def gpu_type_of(self, node: NodeFacts) -> tuple[GpuType, bool]:
        """The node's GPU type (its label, else ``--gpu``) with the memory of its memory label,
        and whether a type label it has is known."""
        gtype, known = self.default_gpu, True
        if node.gpu_type:
            try:
                gtype = gpu_type(node.gpu_type)
            except ValueError:
                known = False
        if node.gpu_mem_mib and node.gpu_mem_mib != gtype.memory_mib:
            gtype = replace(gtype, memory_mib=node.gpu_mem_mib)
        return gtype, known

    def node_gone(self, name: str) -> None:
        """A node was deleted: closed at once, removed once its pods are gone."""
        self.book.not_awaited.discard(name)
        idx = self.state.node_index.get(name)
        if idx is None:
            return
        self.record("node_gone", name=name)
        for job in list(self.state.node_holders[idx]):
            if job.state is ASSUMED:
                self.forget(job, f"node {name} was deleted")
        if self.state.node_holders[idx]:
            if not self.state.node_cordoned[idx]:
                self.handle(NodeChanged("cordoned", idx))
            self.book.gone_nodes.add(name)
        else:
            self.handle(NodeChanged("removed", idx))

    # -- pods ------------------------------------------------------------------------------
    def pod_seen(self, pod: PodFacts) -> None:
        """Any news about a pod (watch event, start-up list, or the pod inside a filter call)."""
        book = self.book
        if pod.gpus == 0:
            book.zero_gpu_seen(pod)
            return
        book.unseen.pop(pod.uid, None)
        if pod.uid in self.evictions.book.inflight:
            pod = self.evictions.evicting_pod_seen(pod)
            if pod is None:
                return
        if not pod.terminal:
            book.key_uid[pod.key] = pod.uid
        elif book.key_uid.get(pod.key) == pod.uid:
            del book.key_uid[pod.key]
        if pod.uid in book.ended:
            # a pod's uid never comes back once it finished or was deleted: this is an older
            # copy (a late event, a scheduler's stale pod); adopting it would hold GPUs forever
            self.counters["stale pods of ended uids ignored"] += 1
            return
        job = book.jobs.get(pod.uid)
        if pod.terminal:
            book.parked.pop(pod.uid, None)
            if job is None:   # gang hook
                self.gangs.member_gone(pod.uid, f"pod {pod.key} ended")
            if job is not None:
                self.end(job, pod, f"pod {pod.phase.lower() if not pod.deleting else 'deleted'}")
            return
        if job is not None:
            book.pods[pod.uid] = pod
        if pod.node_name:
            if job is None and self.gangs.bound_seen(pod):   # gang hook
                return
            bound_pod(self, pod, job)
        elif job is None:
            self.submit(pod)

    def pod_offered(self, pod: PodFacts) -> str:
        """A pod inside a filter call: submitted when the service does not know it, nothing else.
        The body comes from the network, not from the API server: it never ends, adopts or
        updates a pod the service knows, and a pod whose namespace/name the API server has under
        another uid is refused (a made-up uid must not get GPUs: issue 22). Returns why the
        pod is refused, or ''."""
        book = self.book
        known = book.key_uid.get(pod.key)
        if known is not None and known != pod.uid:
            self.counters["filter calls with a uid the API server does not have"] += 1
            return f"uid {pod.uid} is not pod {pod.key} (the API server has it as uid {known})"
        if pod.uid in book.ended:
            self.counters["stale pods of ended uids ignored"] += 1
            return f"pod {pod.key} (uid {pod.uid}) has ended"
        if pod.node_name or pod.terminal:
            return "" if pod.uid in book.jobs else f"pod {pod.key} is not pending"
        if pod.uid in book.jobs or pod.uid in book.parked or self.gangs.owns(pod.uid):   # gang hook
            return ""
        book.unseen[pod.uid] = self.now()
        self.submit(pod)
        return ""

    def expire_unseen(self, ttl: float) -> int:
        """Pods known from filter calls only, that the API server has not shown within ``ttl``
        seconds, are dropped with whatever they hold (a filter for a pod that does not exist
        must not hold GPUs until a restart). Returns how many (the caller runs a pass then)."""
        book, now = self.book, self.now()
        old = [uid for uid, at in book.unseen.items() if now - at >= ttl]
        for uid in old:
            del book.unseen[uid]
            job = book.jobs.get(uid)
            if job is None:
                book.unpark(uid)   # never a job (its VC has no room for it): forgotten
                continue
            if job.state is RUNNING:
                continue
            self.end(job, book.pods[uid], f"the API server did not show the pod within {ttl:g} s")
            book.ended.pop(uid, None)   # not ended: should it appear after all, it is taken
            self.counters["nominations expired (pod unknown to the API server)"] += 1
        self.gangs.expire()   # gang hook: arrival and bind time-outs
        return len(old)

    def pod_gone(self, uid: str) -> None:
        book = self.book
        book.unpark(uid)
        book.zero_gpu.pop(uid, None)
        book.unseen.pop(uid, None)
        self.gangs.member_gone(uid, "pod deleted")   # gang hook
        job = book.jobs.get(uid)
        if job is not None and uid in self.evictions.book.inflight:
            self.evictions.evicted(job, "pod deleted after its eviction")
        elif job is not None:
            self.end(job, book.pods[uid], "pod deleted")

    def vc_problem(self, vc: str, gpus: int) -> str | None:
        st = self.state
        vid = st.vc_index.get(vc)
        if vid is None or not st.vcs[vid].total_gpus:
            return f"VC {vc} has no GPU nodes"
        nodes = st.vcs[vid].nodes
        if any(st.node_gpus[n] >= gpus and not st.node_removed[n] for n in nodes):
            return None   # stops at the first node big enough, not after all of them
        biggest = max((st.node_gpus[n] for n in nodes if not st.node_removed[n]), default=0)
        return f"needs {gpus} GPUs on one node; the largest node of VC {vc} has {biggest}"

    def submit(self, pod: PodFacts) -> None:
        """A pending pod becomes a kernel job (``JobSubmitted``), unless it waits for its gang,
        its VC cannot take it (parked), or it replaces an evicted job."""
        if self.gangs.admit(pod):   # gang hook: a gang's pod waits for its gang, which comes back here whole
            return
        book = self.book
        vc = self.vcs.vc_of(pod)
        problem = self.gangs.vc_problem(vc, pod.uid) if is_gang_id(pod.uid) else self.vc_problem(vc, pod.gpus)
        if problem is not None:
            book.park(pod, problem)
            return
        if self.evictions.replaces(pod):
            return
        book.unpark(pod.uid)
        job = self.new_job(pod, vc)
        if is_gang_id(pod.uid):   # gang hook: its pods' shape, so that the placement cuts it into pods
            job.gpus_per_pod = self.gangs.pod_shape(pod.uid)
        now = self.now()
        book.add(pod, job)
        if not self.noms.serving:
            book.last_outcome[pod.uid] = "unknown"   # what kube-scheduler was told about it: not by this process
        self.handle(JobSubmitted(job), now)   # the policy's job_submitted, the queue, the VC marked
        self.store.log("submit", pod.uid, pod.key, now, detail=f"vc={vc} gpus={pod.gpus}")
        self.record("submit", uid=pod.uid, pod=pod.key, vc=vc, gpus=pod.gpus, submit_time=job.submit_time,
                    model=job.model_name or job.onnx_ref, batch_size=job.batch_size,
                    pred_gpu_util=job.pred_gpu_util, pred_gpu_mem_mib=job.pred_gpu_mem_mib)

    def retry_parked(self) -> None:
        for _uid, pod in list(self.book.parked.items()):
            if pod.node_name:
                bound_pod(self, pod, None)
            else:
                self.submit(pod)

    def end(self, job: Job, pod: PodFacts, why: str) -> None:
        """The pod ended (or is dropped): the job finishes or is withdrawn, its rows released
        behind the core's lock (``Store.release_later``: the caller's ``write_behind``, or the
        next transaction, writes them)."""
        st, now, book = self.state, self.now(), self.book
        uid = job.job_id
        if job.state is RUNNING and self.limits.timed_out(job, pod):
            detail = self.limits.why(job, pod)
            self.handle(JobTimedOut(job), now)   # StopReason.TIME_LIMIT: it will not run again
            self.store.release_later(uid, pod.key, "time_limit", now, detail=detail)
            self.record("time_limit", uid=uid, why=detail)
            self.counters["jobs stopped at their time limit"] += 1
        elif job.state is RUNNING:
            # the time it ran (job.attained_at: the kernel's run record), which the estimators read
            self.handle(JobFinished(job), now)
            self.store.release_later(uid, pod.key, "finish", now, detail=why)
            self.record("finish", uid=uid, why=why)
        else:
            self.store.release_later(uid, pod.key, "withdraw", now, detail=why)
            self.record("withdraw", uid=uid, why=why)
            if job.state is ASSUMED and is_gang_id(uid):   # gang hook: its pods' nominations go
                self.gangs.released(uid, why)
        self.limits.stopping.discard(uid)
        self.handle(JobWithdrawn(job, why), now)   # an assumed start is forgotten; the id is free again
        book.drop(uid, pod.key)
        self.noms.slots.pop(uid, None)
        node_names = [n for n in book.gone_nodes if not st.node_holders[st.node_index[n]]]
        for name in node_names:
            self.handle(NodeChanged("removed", st.node_index[name]), now)
            book.gone_nodes.discard(name)

    def forget(self, job: Job, why: str) -> None:
        """A nomination goes back (``BindFailed``): the GPUs return, the VC is decided again."""
        now = self.now()
        pod = self.book.pods[job.job_id]
        self.handle(BindFailed(job, why), now)
        self.noms.slots.pop(job.job_id, None)
        self.store.release(job.job_id, pod.key, "forget", now, detail=why)
        if is_gang_id(job.job_id):   # gang hook
            self.gangs.released(job.job_id, why)
        self.record("forget", uid=job.job_id, why=why)

    # -- binds -------------------------------------------------------------------------------
    def begin_bind(self, uid: str, node: str) -> tuple[PodFacts, list[int] | None]:
        """Check a bind against the nomination; returns the pod and its GPU indices (None: a
        pending pod that requests no GPU, bound untouched)."""
        book = self.book
        if self.gangs.owns(uid):   # gang hook
            return self.gangs.begin_bind(uid, node)
        job = book.jobs.get(uid)
        if job is None and uid in book.zero_gpu:
            return book.zero_gpu[uid], None
        if job is None:
            raise BindError(f"dlsched has no pending pod with uid {uid}")
        if job.state is not ASSUMED:
            raise BindError(f"pod {book.pods[uid].key} is {job.state.name.lower()}, not nominated")
        nominated = self.state.node_ids[job.placement[0][0]]
        if nominated != node:
            raise BindError(f"pod {book.pods[uid].key} is nominated for {nominated}, not {node}")
        return book.pods[uid], [g for g, _ in self.noms.slots[uid]]

    def end_bind(self, uid: str, node: str, error: str) -> None:
        """The API server answered the bind: confirm the start, or forget it (GPUs return)."""
        job = self.book.jobs.get(uid)
        if job is None or job.state is not ASSUMED:
            return   # the watch got there first (bound, or the pod was deleted)
        if error:
            self.forget(job, f"bind failed: {error}")
            return
        self.handle(BindSucceeded(job))
        self.store.bound_later(uid, self.book.pods[uid].key, node, self.noms.gpus_text(uid), self.now(),
                               kind="bind")   # written after the core's lock (SchedulerCore.end_bind)
        self.record("confirm", uid=uid)
