"""The live service's adapter to the kernel: pods and nodes in as stimuli, actions out as
nominations, evictions and timers.

Everything the service learns becomes a typed stimulus handed to
:meth:`dlsched.kernel.entry.Kernel.handle` (``assume=True``): a new pod is ``JobSubmitted``, a
bind's outcome ``BindSucceeded`` / ``BindFailed``, an ended pod ``JobFinished`` or
``JobWithdrawn``, an agent's reading ``PredictionCorrected``, a node's change ``NodeChanged``; a
*pass* is ``PassRequested``. The actions that come back are carried out here: a ``Bind`` becomes
a nomination written to the durable store before the extender acknowledges it, a ``Postponed``
the pod's waiting reason, a ``WakeAt`` a timer (``due_timers``, fired by the runtime as
``TimerFired``). The service never writes a job's ground-truth slots nor reaches into a placer:
prioritize asks the placement pipeline for its scores (``PlacementPipeline.scores``). Every
stimulus goes to the recorder, so ``dlsched replay --stimuli`` can feed it through the same entry
point. All methods take one lock: the kernel is single-threaded by design.
"""

from __future__ import annotations

import heapq
import threading
import time
from bisect import bisect_left
from collections import Counter, OrderedDict, deque
from collections.abc import Callable
from dataclasses import replace
from itertools import repeat

from dlsched.core.cluster import GpuType, NodeSpec, gpu_type
from dlsched.core.job import Job, JobState
from dlsched.kernel.correction import observe
from dlsched.kernel.queues import KeyedQueue
from dlsched.kernel.state import StateError
from dlsched.kernel.stimuli import (
    Bind,
    BindFailed,
    BindSucceeded,
    Evict,
    JobEvicted,
    JobFailed,
    JobFinished,
    JobSubmitted,
    JobWithdrawn,
    NodeChanged,
    PassRequested,
    Postponed,
    PredictionCorrected,
    Stimulus,
    TimerFired,
    WakeAt,
)
from dlsched.service.evictions import EvictionBook, Intent, grace_of, match_key, policy_grace
from dlsched.service.gangs import GangTable, is_gang_id
from dlsched.service.kernel_setup import live_kernel
from dlsched.service.pods import (
    BATCH_ANNOTATION,
    GPUS_ANNOTATION,
    MODEL_ANNOTATION,
    USER_ANNOTATION,
    NodeFacts,
    PodFacts,
    VcMapping,
    job_name,
    parse_gpu_list,
    training_annotations,
)
from dlsched.service.record import stimulus_fields
from dlsched.service.store import DoubleAssignment, Store

PENDING, RUNNING, ASSUMED, FINISHED = JobState.PENDING, JobState.RUNNING, JobState.ASSUMED, JobState.FINISHED
MAX_SCORE = 10  # the extender protocol's highest host priority
PRIORITY_TOP = MAX_SCORE - 2   # policy scores map to 1..9, below the nominated node's MAX_SCORE
ENDED_KEPT = 100_000   # uids of ended pods remembered, so that a stale copy is not adopted again
ZERO_GPU_KEPT = 10_000  # pending pods that request no GPU, remembered for their bind
NUDGE_AGAIN_S = 5.0   # seconds without a filter call before a pod nudged as unknown is nudged again
NUDGE_TRIES = 2       # nudges of such a pod in all


class BindError(RuntimeError):
    """The bind asked for cannot be carried out (the reason goes back to the kube-scheduler)."""


def gpu_list(mask: int) -> list[int]:
    return [g for g in range(mask.bit_length()) if mask >> g & 1]


class SchedulerCore:
    """Pods -> jobs, passes -> nominations, binds -> confirmed starts; one lock around it all."""

    def __init__(self, policy, store: Store, vc_mapping: VcMapping | None = None, max_jobs_per_gpu: int = 1,
                 clock: Callable[[], float] = time.time, default_gpu: GpuType | None = None,
                 predict: Callable[[Job], None] | None = None, recorder=None,
                 described: dict | None = None) -> None:
        # described: the service's configuration (ServiceConfig.describe()), kept in the log's config line
        self.check_policy(policy)
        self.policy = policy
        self.store = store
        self.vcs = vc_mapping or VcMapping()
        self.clock = clock
        self.default_gpu = default_gpu or GpuType()
        self.predict = predict   # fills a new job's predicted GPU utilisation / memory from its model
        self.recorder = recorder  # the replayable event log (dlsched.service.record), or None
        self.offered: dict[str, frozenset[str]] = {}   # uid -> the nodes kube-scheduler offered in its last filter
        # the kernel's entry point, with starts assumed (a nomination until the bind succeeds), built
        # by the set-up code that a replay of the log uses too (service/kernel_setup.py)
        self.kernel, restricted = live_kernel(policy, max_jobs_per_gpu, self.offered)
        self.state, self.view = self.kernel.state, self.kernel.view
        self.decider = self.kernel.decider
        self.timers: list[tuple[float, int]] = []   # (time, VC index) heap of the policy's WakeAt requests
        self.evictions = EvictionBook()             # evictions in flight, evicted jobs awaiting their new pod
        self.evictor: Callable[[Intent], None] | None = None   # hands an intent to the Eviction API caller
        self.default_grace = policy_grace(policy)   # seconds, when a pod has no dlsched.io/grace-seconds
        # the queue is ordered by policy.key (FIFO, QSSF, ...), or by arrival (Horus's ArrivalQueue)
        self.keyed = isinstance(policy.new_queue(), KeyedQueue)
        self.lock = threading.RLock()
        self.jobs: dict[str, Job] = {}            # pod uid -> job (pending, assumed or running)
        self.pods: dict[str, PodFacts] = {}        # pod uid -> latest facts of a pod with a job
        self.slots: dict[str, list[tuple[int, int]]] = {}   # pod uid -> (GPU, slot) it holds
        self.waiting: dict[str, str] = {}          # pod uid -> why it is not placed (no job / postponed)
        self.parked: dict[str, PodFacts] = {}      # pods that cannot be jobs yet (unknown VC or node)
        self.gone_nodes: set[str] = set()          # deleted nodes still holding pods (removed when empty)
        self.ended: OrderedDict[str, None] = OrderedDict()   # uids of pods that ended (the newest ENDED_KEPT)
        self.counters: Counter[str] = Counter()
        self.passes = 0
        self.observed: dict[str, tuple[float, float, float]] = {}   # pod uid -> (util, mem MiB, at) last read
        self.filter_outcomes: Counter[str] = Counter()   # nominated / waiting / refused (a uid the API server does not have)
        self.recent_filters: deque[dict] = deque(maxlen=50)   # the last answers, with the reasons given
        self.key_uid: dict[str, str] = {}          # namespace/name -> uid, as the API server has it
        self.unseen: dict[str, float] = {}         # uid -> when a pod known from a filter call only was submitted
        self._offered_last: tuple[list[str], frozenset[str]] = ([], frozenset())
        self.last_outcome: dict[str, str] = {}     # uid -> the last filter answer (nominated / waiting / ...)
        self.zero_gpu: OrderedDict[str, PodFacts] = OrderedDict()   # pending pods requesting no GPU
        # told of a nomination of a pod kube-scheduler was told to wait (pod, node, GPU text, True):
        # the service annotates the pending pod, and the update makes kube-scheduler retry it
        self.nudge: Callable[[PodFacts, str, str, bool], None] | None = None
        # told of every nomination once it is in the store (pod, node, GPU text), single pods and
        # each pod of a gang alike, under the lock: the scheduler mode's binder queues its Binding
        self.on_nomination: Callable[[PodFacts, str, str], None] | None = None
        # False until the service answers extender calls (runtime.start): a pod seen before then may
        # have had its last call answered 503 or refused, and sit in kube-scheduler's unschedulable
        # queue until its 60-s flush; its last outcome is "unknown" and it is nudged once nominated
        self.serving = False
        self.startup_nudges: dict[str, tuple[float, int]] = {}   # uid -> (when, times) of a pod nudged as unknown
        self._answering = ""                       # the uid whose filter call is being answered
        self._ranks: dict[int, tuple[tuple, list[tuple], bool]] = {}   # vid -> (stamp, sorted ranks, NaN among them)
        self._now = 0.0
        self.gangs = GangTable()   # gang hook: the pods of one distributed job (service/gangs.py)
        self.gangs.wrap_placement(self)   # gang hook: a gang's placement as its pods
        # queues that borrow (kernel/quotas.py), from the queue ConfigMap (service/queues.py):
        # the configured specs, and why borrowing is off although they allow it ('' when on or
        # when they do not allow it)
        self.queue_specs: tuple = ()
        self.borrowing_refused = ""
        if not restricted:
            self.counters["placements not restricted to offered nodes"] += 1
        from dlsched.service.eta import LiveEta

        self.eta = LiveEta(self)   # forward-simulation start estimates for queue() (docs/eta.md)
        self._record("config", **{**(described or {}), "policy": policy.name,
                                  "placement": getattr(policy, "placement_name", ""),
                                  "backfill": bool(getattr(policy, "backfill", False)),
                                  "max_jobs_per_gpu": max_jobs_per_gpu, "default_gpu": self.default_gpu.name})

    def _mark(self, vid: int) -> None:
        """VC ``vid`` changed: the next pass decides it."""
        self.kernel.mark(vid)

    # -- queues that borrow ---------------------------------------------------------------------
    @property
    def quotas(self):
        """The kernel's queue manager (None: every VC's pods run on its own nodes only)."""
        return self.kernel.quotas

    def set_queues(self, specs: tuple) -> str:
        """Enforce ``specs`` (a queue configuration): when some queue may borrow, the kernel gets a
        queue manager built on the live state (``Kernel.use_queues``: loans re-derived from what
        runs where); otherwise none. Returns '' or why borrowing stays off although the queues
        allow it: as in the simulator, borrowing needs an ordering policy that does not preempt
        on its own (reclaims are the manager's preemptions) and exclusive GPUs. Recorded, so that
        a replay of the log enforces the same queues from the same moment."""
        from dlsched.kernel.quotas import borrowing_possible
        from dlsched.traces.cluster_queues import queues_to_toml

        with self.lock:
            self.queue_specs = tuple(specs)
            self.borrowing_refused = ""
            if self.queue_specs and borrowing_possible(self.queue_specs):
                if getattr(self.policy, "preemptive", False):
                    self.borrowing_refused = (f"queues that borrow need a non-preemptive ordering policy; "
                                              f"{self.policy.name} preempts on its own: borrowing and reclaim "
                                              "are off")
                elif self.state.cap != 1:
                    self.borrowing_refused = (f"queues that borrow need exclusive GPUs (--max-jobs-per-gpu 1, "
                                              f"not {self.state.cap}): borrowing and reclaim are off")
            enforced = self.queue_specs if not self.borrowing_refused else ()
            try:
                manager = self.kernel.use_queues(enforced, self.now())
            except ValueError as exc:
                self.borrowing_refused = f"queues: {exc}: borrowing and reclaim are off"
                manager = None
            if manager is not None:
                self.counters["queue managers built"] += 1
            self._record("queues", toml=queues_to_toml(enforced) if manager is not None else "")
            return self.borrowing_refused

    def _record(self, kind: str, **fields: object) -> None:
        if self.recorder is not None:
            self.recorder.write(kind, self._now, **fields)

    def _handle(self, stimulus: Stimulus, now: float | None = None) -> list:
        """Hand one stimulus to the kernel (recorded first, for replay); returns its actions."""
        now = self.now() if now is None else now
        if self.recorder is not None:
            self.recorder.write("stimulus", now, **stimulus_fields(stimulus, self.state))
        return self.kernel.handle(stimulus, now)

    @staticmethod
    def check_policy(policy) -> None:
        """Live scheduling has no ground truth: an oracle is refused. A preemptive policy runs
        (its Preempt becomes an eviction through the Eviction API; docs/service.md)."""
        if getattr(policy, "oracle", False):
            hint = (" (srtf-pred is SRTF by predicted remaining time)"
                    if getattr(policy, "preemptive", False) else "")
            raise ValueError(f"policy {policy.name} is an oracle (it reads the true durations or co-location "
                             f"speeds a simulation knows): a live cluster has no such ground truth{hint}")

    # -- time ----------------------------------------------------------------------------
    def now(self) -> float:
        """Wall-clock seconds, never going backwards (the kernel's clock only moves forward)."""
        t = self.clock()
        self._now = max(self._now, t)
        return self._now

    # -- nodes -----------------------------------------------------------------------------
    def node_seen(self, node: NodeFacts) -> None:
        with self.lock:
            st, now = self.state, self.now()
            idx = st.node_index.get(node.name)
            gtype, known = self._gpu_type_of(node)
            if idx is not None:
                spec = st.node_specs[idx]
                reshaped = spec.gpus != node.gpus or spec.vc != node.vc
                if reshaped and not st.node_holders[idx]:
                    self._handle(NodeChanged("removed", idx), now)
                    idx = None
                else:
                    if reshaped:
                        self.counters["node changes deferred while busy"] += 1
                    if spec.gpu_type != gtype:
                        # a type or memory label changed: applied at once, busy or not (the old
                        # figure would let co-located pods overfill the node's GPUs)
                        st.set_gpu_type(idx, gtype, now)
                        self.counters["node GPU types or memory changed in place"] += 1
            if idx is None:
                if node.gpus == 0:
                    self.counters["nodes without GPUs ignored"] += 1
                    return
                if not known:
                    self.counters["unknown GPU type labels"] += 1
                self._handle(NodeChanged("added", spec=NodeSpec(node.name, node.vc, node.gpus, gtype)), now)
                idx = st.node_index[node.name]
            self.gone_nodes.discard(node.name)
            spec = st.node_specs[idx]
            self._record("node", name=node.name, vc=node.vc, gpus=node.gpus, gpu_type=spec.gpu_type.name,
                         gpu_mem_mib=spec.gpu_type.memory_mib, cordoned=node.cordoned)
            if node.cordoned != st.node_cordoned[idx]:
                self._handle(NodeChanged("cordoned" if node.cordoned else "uncordoned", idx), now)
            else:
                self._mark(st.node_vc[idx])
            self._retry_parked()

    def _gpu_type_of(self, node: NodeFacts) -> tuple[GpuType, bool]:
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
        with self.lock:
            idx = self.state.node_index.get(name)
            if idx is None:
                return
            self._record("node_gone", name=name)
            for job in list(self.state.node_holders[idx]):
                if job.state is ASSUMED:
                    self._forget(job, f"node {name} was deleted")
            if self.state.node_holders[idx]:
                if not self.state.node_cordoned[idx]:
                    self._handle(NodeChanged("cordoned", idx))
                self.gone_nodes.add(name)
            else:
                self._handle(NodeChanged("removed", idx))

    # -- pods ------------------------------------------------------------------------------
    def pod_seen(self, pod: PodFacts) -> None:
        """Any news about a pod (watch event, start-up list, or the pod inside a filter call)."""
        with self.lock:
            if pod.gpus == 0:
                self._zero_gpu_seen(pod)
                return
            self.unseen.pop(pod.uid, None)
            if pod.uid in self.evictions.inflight:
                pod = self._evicting_pod_seen(pod)
                if pod is None:
                    return
            if not pod.terminal:
                self.key_uid[pod.key] = pod.uid
            elif self.key_uid.get(pod.key) == pod.uid:
                del self.key_uid[pod.key]
            if pod.uid in self.ended:
                # a pod's uid never comes back once it finished or was deleted: this is an older
                # copy (a late event, a scheduler's stale pod); adopting it would hold GPUs forever
                self.counters["stale pods of ended uids ignored"] += 1
                return
            job = self.jobs.get(pod.uid)
            if pod.terminal:
                self.parked.pop(pod.uid, None)
                if job is None:   # gang hook
                    self.gangs.member_gone(self, pod.uid, f"pod {pod.key} ended")
                if job is not None:
                    self._end(job, pod, f"pod {pod.phase.lower() if not pod.deleting else 'deleted'}")
                return
            if job is not None:
                self.pods[pod.uid] = pod
            if pod.node_name:
                if job is None and self.gangs.bound_seen(self, pod):   # gang hook
                    return
                self._bound_pod(pod, job)
            elif job is None:
                self._submit(pod)

    def pod_offered(self, pod: PodFacts) -> str:
        """A pod inside a filter call: submitted when the service does not know it, nothing else.
        The body comes from the network, not from the API server: it never ends, adopts or
        updates a pod the service knows, and a pod whose namespace/name the API server has under
        another uid is refused (a made-up uid must not get GPUs: issue 22). Returns why the
        pod is refused, or ''."""
        known = self.key_uid.get(pod.key)
        if known is not None and known != pod.uid:
            self.counters["filter calls with a uid the API server does not have"] += 1
            return f"uid {pod.uid} is not pod {pod.key} (the API server has it as uid {known})"
        if pod.uid in self.ended:
            self.counters["stale pods of ended uids ignored"] += 1
            return f"pod {pod.key} (uid {pod.uid}) has ended"
        if pod.node_name or pod.terminal:
            return "" if pod.uid in self.jobs else f"pod {pod.key} is not pending"
        if pod.uid in self.jobs or pod.uid in self.parked or self.gangs.owns(pod.uid):   # gang hook
            return ""
        self.unseen[pod.uid] = self.now()
        self._submit(pod)
        return ""

    def _zero_gpu_seen(self, pod: PodFacts) -> None:
        """A pod that requests no GPU is never a job; its bind (kube-scheduler sends it to the
        extender when ``nvidia.com/gpu: 0`` is listed) binds it untouched."""
        if pod.node_name or pod.terminal:
            self.zero_gpu.pop(pod.uid, None)
            return
        self.zero_gpu[pod.uid] = pod
        self.zero_gpu.move_to_end(pod.uid)
        if len(self.zero_gpu) > ZERO_GPU_KEPT:
            self.zero_gpu.popitem(last=False)

    def expire_unseen(self, ttl: float) -> int:
        """Pods known from filter calls only, that the API server has not shown within ``ttl``
        seconds, are dropped with whatever they hold (a filter for a pod that does not exist
        must not hold GPUs until a restart). Returns how many."""
        with self.lock:
            now = self.now()
            old = [uid for uid, at in self.unseen.items() if now - at >= ttl]
            for uid in old:
                del self.unseen[uid]
                job = self.jobs.get(uid)
                if job is None:
                    self.parked.pop(uid, None)   # never a job (its VC has no room for it): forgotten
                    self.waiting.pop(uid, None)
                    continue
                if job.state is RUNNING:
                    continue
                self._end(job, self.pods[uid], f"the API server did not show the pod within {ttl:g} s")
                self.ended.pop(uid, None)   # not ended: should it appear after all, it is taken
                self.counters["nominations expired (pod unknown to the API server)"] += 1
            self.gangs.expire(self)   # gang hook: arrival and bind time-outs
            if old:
                self.run_pass()
            return len(old)

    def pod_gone(self, uid: str) -> None:
        with self.lock:
            self.parked.pop(uid, None)
            self.waiting.pop(uid, None)
            self.zero_gpu.pop(uid, None)
            self.unseen.pop(uid, None)
            self.gangs.member_gone(self, uid, "pod deleted")   # gang hook
            job = self.jobs.get(uid)
            if job is not None and uid in self.evictions.inflight:
                self._evicted(job, "pod deleted after its eviction")
            elif job is not None:
                self._end(job, self.pods[uid], "pod deleted")

    def _new_job(self, pod: PodFacts, vc: str) -> Job:
        ann = pod.annotations
        model = str(ann.get(MODEL_ANNOTATION) or "")
        try:
            batch = int(ann.get(BATCH_ANNOTATION) or 0)
        except (TypeError, ValueError):
            batch, _ = 0, self.counters.update(["bad batch-size annotations"])
        job = Job(pod.uid, vc, pod.gpus, pod.created or self.now(), float("nan"),
                  user=str(ann.get(USER_ANNOTATION) or pod.namespace), name=job_name(pod),
                  model_name="" if model.endswith(".onnx") else model,
                  onnx_ref=model if model.endswith(".onnx") else "", batch_size=max(batch, 0))
        meta, bad = training_annotations(ann)
        job.attention, job.stack = meta["attention"], meta["stack"]
        self.counters.update(["bad attention annotations"] * len(bad))
        if self.predict is not None and model:
            self.predict(job)
            if job.pred_gpu_mem_mib != job.pred_gpu_mem_mib:
                self.counters["model annotations without a prediction"] += 1
        return job

    def _vc_problem(self, vc: str, gpus: int) -> str | None:
        vid = self.state.vc_index.get(vc)
        if vid is None or not self.state.vcs[vid].total_gpus:
            return f"VC {vc} has no GPU nodes"
        st = self.state
        nodes = st.vcs[vid].nodes
        if any(st.node_gpus[n] >= gpus and not st.node_removed[n] for n in nodes):
            return None   # stops at the first node big enough, not after all of them
        biggest = max((st.node_gpus[n] for n in nodes if not st.node_removed[n]), default=0)
        return f"needs {gpus} GPUs on one node; the largest node of VC {vc} has {biggest}"

    def _submit(self, pod: PodFacts) -> None:
        if self.gangs.admit(self, pod):   # gang hook: a gang's pod waits for its gang, which comes back here whole
            return
        vc = self.vcs.vc_of(pod)
        problem = self.gangs.vc_problem(self, vc, pod.uid) if is_gang_id(pod.uid) else self._vc_problem(vc, pod.gpus)
        if problem is not None:
            self.parked[pod.uid] = pod
            self.waiting[pod.uid] = problem
            return
        if (self.evictions.inflight or self.evictions.awaiting) and self._replacement_seen(pod):
            return
        self.parked.pop(pod.uid, None)
        self.waiting.pop(pod.uid, None)
        job = self._new_job(pod, vc)
        if is_gang_id(pod.uid):   # gang hook: its pods' shape, so that the placement cuts it into pods
            job.gpus_per_pod = self.gangs.pod_shape(pod.uid)
        now = self.now()
        self.jobs[pod.uid] = job
        self.pods[pod.uid] = pod
        if not self.serving:
            self.last_outcome[pod.uid] = "unknown"   # what kube-scheduler was told about it: not by this process
        self._handle(JobSubmitted(job), now)   # the policy's job_submitted, the queue, the VC marked
        self.store.log("submit", pod.uid, pod.key, now, detail=f"vc={vc} gpus={pod.gpus}")
        self._record("submit", uid=pod.uid, pod=pod.key, vc=vc, gpus=pod.gpus, submit_time=job.submit_time,
                     model=job.model_name or job.onnx_ref, batch_size=job.batch_size,
                     pred_gpu_util=job.pred_gpu_util, pred_gpu_mem_mib=job.pred_gpu_mem_mib)

    def _retry_parked(self) -> None:
        for _uid, pod in list(self.parked.items()):
            if pod.node_name:
                self._bound_pod(pod, None)
            else:
                self._submit(pod)

    def _bound_pod(self, pod: PodFacts, job: Job | None) -> None:
        """The API server says the pod is on ``pod.node_name``: confirm our nomination, or adopt it."""
        st = self.state
        if job is not None and job.state is ASSUMED:
            node = st.node_ids[job.placement[0][0]]
            if node == pod.node_name:
                self._handle(BindSucceeded(job))
                self.store.bound(pod.uid, pod.key, node, self._gpus_text(pod.uid), self.now(), kind="confirm",
                                 detail="seen bound by the API server")
                self._record("confirm", uid=pod.uid)
                return
            self._forget(job, f"bound to {pod.node_name} by someone else")
        if job is not None and job.state is RUNNING:
            return
        idx = st.node_index.get(pod.node_name)
        if job is not None and idx is not None and job.vc_state.vid != st.node_vc[idx]:
            self._handle(JobWithdrawn(job, f"bound to {pod.node_name} of another VC"))   # queued in its own VC
            self.jobs.pop(pod.uid, None)
            job = None
        if idx is None:
            self.parked[pod.uid] = pod
            self.waiting[pod.uid] = f"bound to node {pod.node_name}, which the service does not know (yet)"
            return
        mask = self._adopt_mask(idx, pod)
        if mask is None:
            self.counters["bound pods without room (over-committed node)"] += 1
            self.parked[pod.uid] = pod
            self.waiting[pod.uid] = f"bound to {pod.node_name} but its GPUs are all held"
            return
        self.parked.pop(pod.uid, None)
        self.waiting.pop(pod.uid, None)
        now = self.now()
        host = st.vcs[st.node_vc[idx]]
        lender = self._lender_of(pod, host) if job is None else None
        if job is None:
            job = self._new_job(pod, host.name if lender is None else self.vcs.vc_of(pod))
            self.jobs[pod.uid] = job
            self.pods[pod.uid] = pod
            self._handle(JobSubmitted(job), now)
        # a pod bound outside this process is not a decision: its start is booked as it stands
        # (the "adopted" line lets a replay book it the same way)
        self._record("adopted", uid=pod.uid, node=pod.node_name, gpus=gpu_list(mask), borrowed=lender is not None)
        reclose = st.node_cordoned[idx]
        if reclose:  # a pod bound before its node was cordoned still runs there
            st.uncordon(idx, now)
        if lender is not None:   # a borrowed pod found running (a restart): its loan is booked again
            st.start_borrowed(job, lender, ((idx, mask),), now)
            self.kernel.quotas.adopt(job)
        else:
            st.start(job, ((idx, mask),), now, shared=bool(st.node_mask[idx] & mask), confirm=True)
        if reclose:
            st.cordon(idx, now)
        slots = self._take_slots(pod.uid, idx, mask)
        self._record("start", uid=pod.uid, node=pod.node_name, gpus=gpu_list(mask), adopted=True)
        try:
            self.store.adopt(pod.uid, pod.key, pod.node_name, slots, now, detail="bound pod seen")
        except DoubleAssignment:
            self.counters["adopt conflicts in the store"] += 1
        self._mark(st.node_vc[idx])

    def _lender_of(self, pod: PodFacts, host) -> object | None:
        """The VC whose node a bound pod of another queue runs on, when the queue manager allows
        that queue to borrow there (a borrowed pod found at a restart: adopted into its own VC,
        its loan booked); None: the pod is adopted into the node's VC, as without queues."""
        quotas = self.kernel.quotas
        if quotas is None:
            return None
        vid = self.state.vc_index.get(self.vcs.vc_of(pod))
        if vid is None or vid == host.vid or not quotas.tree.may_lend_between(self.state.vcs[vid].name, host.name):
            return None
        return host

    def _adopt_mask(self, idx: int, pod: PodFacts) -> int | None:
        """GPUs of a pod bound outside this process: its annotation when valid and free, else the
        lowest-numbered GPUs with room."""
        st = self.state
        room = (~st.node_mask[idx] & ((1 << st.node_gpus[idx]) - 1)) | st.node_share[idx]
        text = pod.annotations.get(GPUS_ANNOTATION)
        if isinstance(text, str):
            idx_list = parse_gpu_list(text, st.node_gpus[idx])
            if idx_list is not None and len(idx_list) == pod.gpus:
                mask = sum(1 << g for g in idx_list)
                if mask & room == mask:
                    return mask
            self.counters["GPU annotations not usable at adoption"] += 1
        free = [g for g in range(st.node_gpus[idx]) if room >> g & 1]
        if len(free) < pod.gpus:
            return None
        return sum(1 << g for g in free[:pod.gpus])

    def _take_slots(self, uid: str, idx: int, mask: int) -> list[tuple[int, int]]:
        """(GPU, slot) pairs: the slot is the lowest not used by the GPU's other holders."""
        st = self.state
        out = []
        for g in gpu_list(mask):
            used = {s for other in st.gpu_holders(idx, g) if other.job_id != uid
                    for gg, s in self.slots.get(other.job_id, ()) if gg == g}
            out.append((g, min(s for s in range(st.cap + 1) if s not in used)))
        self.slots[uid] = out
        return out

    def _gpus_text(self, uid: str) -> str:
        return ",".join(str(g) for g, _ in self.slots.get(uid, ()))

    def _end(self, job: Job, pod: PodFacts, why: str) -> None:
        st, now = self.state, self.now()
        uid = job.job_id
        if job.state is RUNNING:
            # the time it ran (job.attained_at: the kernel's run record), which the estimators read
            self._handle(JobFinished(job), now)
            self.store.release(uid, pod.key, "finish", now, detail=why)
            self._record("finish", uid=uid, why=why)
        else:
            self.store.release(uid, pod.key, "withdraw", now, detail=why)
            self._record("withdraw", uid=uid, why=why)
            if job.state is ASSUMED and is_gang_id(uid):   # gang hook: its pods' nominations go
                self.gangs.released(self, uid, why)
        self._handle(JobWithdrawn(job, why), now)   # an assumed start is forgotten; the id is free again
        self.ended[uid] = None
        if len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)
        self.jobs.pop(uid, None)
        self.pods.pop(uid, None)
        self.slots.pop(uid, None)
        self.waiting.pop(uid, None)
        self.observed.pop(uid, None)
        self.offered.pop(uid, None)
        self.last_outcome.pop(uid, None)
        if self.key_uid.get(pod.key) == uid:
            del self.key_uid[pod.key]
        node_names = [n for n in self.gone_nodes if not st.node_holders[st.node_index[n]]]
        for name in node_names:
            self._handle(NodeChanged("removed", st.node_index[name]), now)
            self.gone_nodes.discard(name)

    def _forget(self, job: Job, why: str) -> None:
        now = self.now()
        pod = self.pods[job.job_id]
        self._handle(BindFailed(job, why), now)   # the GPUs return, the VC is decided again
        self.slots.pop(job.job_id, None)
        self.store.release(job.job_id, pod.key, "forget", now, detail=why)
        if is_gang_id(job.job_id):   # gang hook
            self.gangs.released(self, job.job_id, why)
        self._record("forget", uid=job.job_id, why=why)

    # -- passes ------------------------------------------------------------------------------
    # Replicas with leader election (service/leader.py) set this: a replica that does not hold the
    # lease nominates nothing (its changed VCs stay marked and are decided once it leads).
    may_nominate: Callable[[], bool] = staticmethod(lambda: True)

    def run_pass(self) -> int:
        """One policy pass over every changed VC (``PassRequested``: the kernel's one dispatcher,
        with starts assumed), its actions carried out; returns the number of new nominations."""
        with self.lock:
            if not self.kernel.pending_pass or not self.may_nominate():
                return 0
            now = self.now()
            decider = self.decider
            self.passes += sum(1 for vc in decider.dirty if vc.pending or vc in decider.woken)
            actions = self._handle(PassRequested(), now)
            count = self._carry_out(actions, now)
            if self.gangs.by_job:
                self.gangs.after_pass(self)   # gang hook: why a gang's pods find no room (said once)
            return count

    def _carry_out(self, actions: list, now: float) -> int:
        """The kernel's actions, in its order: a Bind becomes a nomination (store first), a
        Postponed the pod's waiting reason, a WakeAt a timer, an Evict an eviction. A refused
        nomination stands while the rest are booked, then goes back (``BindFailed``). Returns the
        number of nominations."""
        count = 0
        refused: list[tuple[Bind, str, str]] = []
        for action in actions:
            kind = type(action)
            if kind is Bind:
                outcome = self._nominate(action, now)
                if outcome is None:
                    count += 1
                else:
                    refused.append((action, *outcome))
            elif kind is Postponed:
                self.waiting[action.job.job_id] = f"postponed by the policy: {action.reason}"
            elif kind is WakeAt:
                self._timer(action)
            elif kind is Evict:
                self._evict(action, now)
        for action, counter, why in refused:
            job = action.job
            self.counters[counter] += 1
            idx, mask = action.placement[0]
            self._record("refused", uid=job.job_id, node=self.state.node_ids[idx], gpus=gpu_list(mask), why=why)
            if job.state is ASSUMED:
                self._handle(BindFailed(job, why), now)
            self.slots.pop(job.job_id, None)
            self.waiting[job.job_id] = why
        return count

    def _timer(self, action: WakeAt) -> None:
        """The policy asked for a pass at ``action.time``: kept until :meth:`fire_timers`."""
        heapq.heappush(self.timers, (action.time, action.vid))

    def next_timer(self) -> float | None:
        """When the earliest timer is due (service clock), or None."""
        with self.lock:
            return self.timers[0][0] if self.timers else None

    def fire_timers(self) -> int:
        """Every timer due by now becomes ``TimerFired`` (a pass over its VC, even with nothing
        new), its actions carried out; returns how many fired. The runtime's timer thread calls
        it when the earliest is due (service/runtime.py)."""
        with self.lock:
            if not self.timers or not self.may_nominate():
                return 0
            now = self.now()
            fired = 0
            while self.timers and self.timers[0][0] <= now:
                _, vid = heapq.heappop(self.timers)
                fired += 1
                self.passes += 1
                actions = self._handle(TimerFired(vid), now)
                self._carry_out(actions, now)
            return fired

    # -- live preemption (service/evictions.py: the book; service/evictor.py: the API calls) ----
    def _evict(self, action: Evict, now: float) -> None:
        """A preemption decided live: the intent goes to the store first (a restart completes it,
        never decides it twice), then to the evictor. The job keeps its GPUs until its pod is
        gone. An eviction in flight is not asked for again; a nomination is simply withdrawn."""
        job = action.job
        uid = job.job_id
        book = self.evictions
        if uid in book.inflight:
            self.counters["evictions already in flight"] += 1
            return
        if job.state is ASSUMED:   # not bound yet: nothing to evict, the nomination goes back
            self._forget(job, f"preempted before its bind: {action.reason}")
            self.counters["nominations withdrawn by a preemption"] += 1
            return
        if job.state is not RUNNING or uid not in self.pods:
            return
        pod = self.pods[uid]
        for_job = action.for_job or self._evicted_for(job)
        for_pod = self.pods[for_job.job_id].key if for_job is not None and for_job.job_id in self.pods else ""
        grace, bad = grace_of(pod, self.default_grace)
        if bad:
            self.counters["bad grace-seconds annotations"] += 1
        intent_id = self.store.evict_intent(uid, pod.key, for_pod, action.reason, grace, now)
        book.inflight[uid] = intent_id
        self.counters["evictions requested"] += 1
        self._record("evict", uid=uid, pod=pod.key, **{"for": for_pod}, why=action.reason, grace_s=grace)
        intent = Intent(intent_id, uid, pod.namespace, pod.name, for_pod, action.reason, grace)
        if self.evictor is not None:
            self.evictor(intent)
        else:
            self.counters["evictions without an API server"] += 1

    def _evicted_for(self, job: Job) -> Job | None:
        """The pending job a preemption makes room for, when the decision does not say: the
        first in the policy's order of the evicted job's VC."""
        queue = job.vc_state.queue
        return min(queue, key=self._rank, default=None)

    def _evicting_pod_seen(self, pod: PodFacts) -> PodFacts | None:
        """A pod being evicted: while it checkpoints (deletion pending, not yet Failed or
        Succeeded) it keeps its GPUs, so it is read as running; Failed: it is gone (the job is
        evicted); Succeeded: it finished first (the normal end). None when nothing else is to do."""
        if pod.phase == "Failed":
            job = self.jobs.get(pod.uid)
            if job is not None:
                self._evicted(job, "pod failed after its eviction")
            return None
        if pod.phase == "Succeeded":
            self.evictions.inflight.pop(pod.uid, None)
            self.evictions.terminating.discard(pod.uid)
            return pod
        if pod.deleting:
            self.evictions.terminating.add(pod.uid)
            return replace(pod, deleting=False)
        return pod

    def _evicted(self, job: Job, why: str) -> None:
        """The evicted pod is gone: the kernel stops the job (``JobEvicted``: attained service
        booked, re-queued); it then waits out of the queue for the pod its controller creates
        again (:func:`match_key`), or ends when nothing will (a bare pod)."""
        now = self.now()
        uid = job.job_id
        pod = self.pods[uid]
        self.evictions.inflight.pop(uid, None)
        self.evictions.terminating.discard(uid)
        if job.state is RUNNING:
            self._handle(JobEvicted(job), now)
        self.store.release(uid, pod.key, "preempted", now, detail=why)
        self._record("evicted", uid=uid, why=why)
        key = match_key(pod)
        if key is None or job.state is not PENDING:
            self.counters["evicted pods without a controller (ended)"] += 1
            if job.state is PENDING:
                self._end(job, pod, f"{why}; no controller re-creates it")
            return
        self._handle(JobWithdrawn(job, f"{why}; waiting for its controller's new pod"), now)
        for table in (self.jobs, self.pods, self.slots, self.waiting, self.observed, self.offered, self.last_outcome):
            table.pop(uid, None)
        self.ended[uid] = None
        if self.key_uid.get(pod.key) == uid:
            del self.key_uid[pod.key]
        self.evictions.keep(key, job)
        self.counters["evicted jobs awaiting their new pod"] += 1
        for _other, waiting in list(self.parked.items()):   # a new pod seen while this one checkpointed
            if match_key(waiting) == key and not waiting.node_name:
                self._submit(waiting)

    def _replacement_seen(self, pod: PodFacts) -> bool:
        """A new pending pod: the replacement of an evicted job (it takes the job over: queue
        entry, attained service, eviction count, submit time), or of a pod still checkpointing
        (parked until that one is gone). False: an ordinary new pod."""
        book = self.evictions
        old = book.replaced_by(pod, self.pods)
        if old is not None:
            self.parked[pod.uid] = pod
            self.waiting[pod.uid] = f"replaces {self.pods[old].key}, which is being evicted (grace period)"
            return True
        key = match_key(pod)
        job = book.awaiting.pop(key, None) if key is not None else None
        if job is None:
            return False
        now = self.now()
        self.parked.pop(pod.uid, None)
        self.waiting.pop(pod.uid, None)
        previous = job.job_id
        job.job_id = pod.uid   # its name (the duration key) is the evicted pod's: the same job
        self.jobs[pod.uid] = job
        self.pods[pod.uid] = pod
        self._handle(JobSubmitted(job), now)
        self.counters["evicted jobs re-queued"] += 1
        self.store.log("requeue", pod.uid, pod.key, now,
                       detail=f"replaces evicted {previous}: attained {job.attained:.1f} GPU-s, "
                              f"evictions {job.preemptions}")
        self._record("requeue", uid=pod.uid, pod=pod.key, replaces=previous, attained=job.attained,
                     evictions=job.preemptions, submit_time=job.submit_time)
        return True

    def load_evictions(self, rows: list[dict]) -> None:
        """At start-up, before the pods are listed: the store's intents whose pods may still be
        there, so that their deletion reads as an eviction and none is asked for again."""
        for row in rows:
            self.evictions.inflight[row["pod_uid"]] = row["id"]
            if row["state"] == "pending":
                self.evictions.resume.append(row)

    def resume_evictions(self) -> tuple[int, int]:
        """After the pods are listed: a pending intent whose pod still runs is handed to the
        evictor (once, under its own id); one whose pod is gone is marked done. Intents of pods
        not listed are dropped from the book. Returns (resumed, closed)."""
        with self.lock:
            book = self.evictions
            resumed = closed = 0
            now = self.now()
            for row in book.resume:
                uid = row["pod_uid"]
                job = self.jobs.get(uid)
                if job is not None and job.state is RUNNING and uid not in book.terminating:
                    pod = self.pods[uid]
                    intent = Intent(row["id"], uid, pod.namespace, pod.name, row["for_pod"], row["reason"],
                                    int(row["grace_s"]))
                    if self.evictor is not None:
                        self.evictor(intent)
                        resumed += 1
                        continue
                self.store.evict_done(row["id"], "the pod was gone or terminating at restart: not sent", now)
                closed += 1
            book.resume.clear()
            for uid in [u for u in book.inflight if u not in self.jobs]:
                del book.inflight[uid]
            self.counters["eviction intents resumed at start-up"] += resumed
            return resumed, closed

    def eviction_sent(self, intent: Intent, outcome: str) -> None:
        """The evictor's report: the Eviction API accepted (or the pod was gone)."""
        with self.lock:
            self.counters[f"evictions {outcome}"] += 1
            self.store.evict_done(intent.intent_id, outcome, self.now())

    def _nominate(self, decision: Bind, now: float) -> tuple[str, str] | None:
        """Book an assumed start as a nomination (store first). Returns None, or (counter, why)
        when it is refused (the caller returns the GPUs once the pass's actions are booked)."""
        st = self.state
        job, placement, shared = decision
        uid = job.job_id
        if is_gang_id(uid):   # gang hook: every pod of the gang nominated at once
            return self.gangs.nominate(self, decision, now)
        pod = self.pods[uid]
        if len(placement) != 1:   # a policy that places without its placer (the placer refuses them)
            return "multi-node placements refused", (f"the policy placed it on {len(placement)} nodes; "
                                                      f"a pod runs on one node")
        idx, mask = placement[0]
        allowed = self.offered.get(uid)
        if allowed is not None and st.node_ids[idx] not in allowed:
            # a policy that places without the restricted placement (its own shortcut): refused
            return ("nominations off the nodes kube-scheduler offered",
                    f"the policy placed it on {st.node_ids[idx]}, which kube-scheduler did not "
                    f"offer for this pod (its selector, affinity or taints)")
        slots = self._take_slots(uid, idx, mask)
        try:
            self.store.assume(uid, pod.key, st.node_ids[idx], slots, now, detail=f"policy={self.policy.name}")
        except DoubleAssignment as exc:
            return "nominations refused by the store", str(exc)
        self.waiting.pop(uid, None)
        self._record("start", uid=uid, node=st.node_ids[idx], gpus=[g for g, _ in slots], shared=bool(shared))
        if self.on_nomination is not None:
            self.on_nomination(pod, st.node_ids[idx], ",".join(str(g) for g, _ in slots))
        outcome = self.last_outcome.get(uid, "nominated")
        if self.nudge is not None and uid != self._answering and outcome != "nominated" \
                and (self.serving or outcome != "unknown"):
            # kube-scheduler was told to wait, or its call was never answered by this process (and
            # this is not the pod's own filter call, whose answer is on its way): it would not ask
            # again before a cluster event or 60 s. An unknown pod nominated before the service
            # answers calls is nudged by due_nudges once it does (a nudge now would send the pod
            # to a server not yet listening, and back to the unschedulable queue).
            self._send_nudge(uid, st.node_ids[idx], ",".join(str(g) for g, _ in slots), now, outcome == "unknown")
        return None

    def _send_nudge(self, uid: str, node: str, gpus: str, now: float, unknown: bool) -> None:
        self.last_outcome[uid] = "nudged"
        if unknown:
            self.startup_nudges[uid] = (now, self.startup_nudges.get(uid, (0.0, 0))[1] + 1)
        self.nudge(self.pods[uid], node, gpus, True)

    def due_nudges(self, again_after: float = NUDGE_AGAIN_S, tries: int = NUDGE_TRIES) -> int:
        """Nudge every nominated pod whose last extender call this process did not answer (it was
        seen before the service answered calls: a start-up, a new leader), once the service does;
        again after ``again_after`` seconds without a filter call for it, ``tries`` times in all
        (the first nudge may have reached kube-scheduler before the server listened). Gang pods
        are nudged by their gang by the same rule (``GangTable.due_nudges``). Returns the nudges sent."""
        if self.nudge is None or not self.serving:
            return 0
        with self.lock:
            now, sent = self.now(), 0
            for uid, outcome in list(self.last_outcome.items()):
                job = self.jobs.get(uid)
                if job is None or job.state is not ASSUMED or is_gang_id(uid) or self.gangs.owns(uid):
                    continue
                at, times = self.startup_nudges.get(uid, (0.0, 0))
                if outcome == "unknown" or (outcome == "nudged" and 0 < times < tries and now - at >= again_after):
                    self._send_nudge(uid, self.state.node_ids[job.placement[0][0]], self._gpus_text(uid), now, True)
                    sent += 1
            for uid in [u for u in self.startup_nudges if u not in self.jobs]:
                del self.startup_nudges[uid]
            return sent + self.gangs.due_nudges(self, now, again_after, tries)   # gang hook: its pods

    def nudge_wanted(self, uid: str, node: str) -> bool:
        """Whether a queued nudge is still worth its API write: the pod is still nominated on
        ``node`` and kube-scheduler was not told "nominated" since (its bind is then on its way)."""
        with self.lock:
            job = self.jobs.get(uid)
            if job is None and self.gangs.owns(uid):   # gang hook: a gang's pod is nominated through its gang
                return self.gangs.nudge_wanted(self, uid, node)
            return (job is not None and job.state is ASSUMED and self.last_outcome.get(uid) != "nominated"
                    and self.state.node_ids[job.placement[0][0]] == node)

    # -- the extender's questions ---------------------------------------------------------------
    def filter(self, pod: PodFacts, node_names: list[str]) -> tuple[list[str], dict[str, str]]:
        """(nodes that pass, node -> reason for each rejected one)."""
        passed, why = self.verdict(pod, node_names)
        keep = set(passed)
        return passed, {n: why for n in node_names if n not in keep}

    def verdict(self, pod: PodFacts, node_names: list[str]) -> tuple[list[str], str]:
        """The filter's answer: (nodes that pass, the one reason every other node fails with)."""
        with self.lock:
            if pod.gpus == 0:
                self._zero_gpu_seen(pod)
                return list(node_names), ""
            refused = self.pod_offered(pod)
            if refused:
                return self._answer(pod, "refused", [], node_names, refused)
            self._note_offered(pod.uid, node_names)
            self._answering = pod.uid
            try:
                self.run_pass()
                gang = self.gangs.verdict(self, pod.uid, node_names)   # gang hook
                if gang is not None:
                    return self._answer(pod, gang[0], gang[1], node_names, gang[2])
                job = self.jobs.get(pod.uid)
                if job is not None and job.state is ASSUMED:
                    node = self.state.node_ids[job.placement[0][0]]
                    if node not in node_names:
                        # nominated before kube-scheduler said where the pod may go (its selector,
                        # affinity, taints): decided again at once, on the nodes it offered
                        self._forget(job, f"nominated {node}, which the scheduler did not offer")
                        self.counters["nominations moved to an offered node"] += 1
                        self.run_pass()
                if job is not None and job.state is ASSUMED:
                    node = self.state.node_ids[job.placement[0][0]]
                    why = f"dlsched ({self.policy.name}) nominated {node} for this pod"
                    return self._answer(pod, "nominated", [node], node_names, why)
            finally:
                self._answering = ""
            why = self.why_waiting(pod.uid)
            return self._answer(pod, "waiting", [], node_names, why)

    def _note_offered(self, uid: str, node_names: list[str]) -> None:
        """Remember the nodes kube-scheduler offered for this pod (the set is shared while
        kube-scheduler sends the same list for pod after pod)."""
        last_names, last_set = self._offered_last
        if node_names != last_names:
            last_set = frozenset(node_names)
            self._offered_last = (list(node_names), last_set)
        if uid in self.jobs and self.offered.get(uid) is not last_set:
            self.offered[uid] = last_set
            job = self.jobs[uid]
            if job.state is PENDING:
                self._mark(job.vc_state.vid)   # other nodes now: worth another pass

    def _answer(self, pod: PodFacts, outcome: str, passed: list[str], node_names: list[str],
                why: str) -> tuple[list[str], str]:
        """Count a filter answer and keep it (with the reason the other nodes were rejected)."""
        self.filter_outcomes[outcome] += 1
        if pod.uid in self.jobs:
            self.last_outcome[pod.uid] = outcome
        self.recent_filters.append({"at": self._now, "pod": pod.key, "outcome": outcome, "passed": passed,
                                    "rejected": len(node_names) - len(passed), "reason": why})
        return passed, why

    def priorities(self, pod: PodFacts, node_names: list[str]) -> list[int]:
        """The score of each of ``node_names``, in order: the nominated node MAX_SCORE (10); every
        other node the policy's placement scores for this pod on it, mapped to 1..9
        (:meth:`policy_scores`), or 0 where the pod cannot go (no room, the placement's filters,
        another VC, unknown to dlsched). A list of ints, not of pairs: the reply is written from it."""
        with self.lock:
            job = self.jobs.get(pod.uid)
            if job is None or job.state is RUNNING:
                return [0] * len(node_names)
            scores = self.policy_scores(job)
            if job.state is ASSUMED:
                scores[self.state.node_ids[job.placement[0][0]]] = MAX_SCORE
            return list(map(scores.get, node_names, repeat(0, len(node_names))))

    def policy_scores(self, job: Job) -> dict[str, int]:
        """The placement's score stage for ``job`` (``PlacementPipeline.scores``: every node of
        its VC that could take it now and passes the filters -> the weighted mean of the scorers
        in [0, 1]) as ``1 + floor(8 * s + 0.5)`` in 1..9, so that any node the policy would accept
        outranks one it would not, and the nominated node (10) outranks them all. A node the job
        holds GPUs on (its nomination) is scored as it stands, the job's GPUs taken."""
        scores = getattr(getattr(self.policy, "placer", None), "scores", None)
        if scores is None:
            return {}
        self.view.now = self.now()
        ids = self.state.node_ids
        raw = scores(self.view, job.vc_state, job)
        mapped = {total: _priority(total) for total in set(raw.values())}   # few distinct scores, many nodes
        return {ids[node]: mapped[total] for node, total in raw.items()}

    def why_waiting(self, uid: str) -> str:
        job = self.jobs.get(uid)
        if job is None:
            return self.waiting.get(uid, "dlsched does not know this pod")
        if job.state is RUNNING:
            return f"already running on {self.state.node_ids[job.placement[0][0]]}"
        if uid in self.waiting:
            return self.waiting[uid]
        vc = job.vc_state
        ahead = self._ahead(job)
        eta = self.eta.reason(uid, self._now)   # the last refresh's ETA, never a refresh here
        if not self.keyed:   # e.g. Horus: its own rounds pick among the pending jobs, skipping misfits
            return (f"queued by dlsched ({self.policy.name}): no room the policy accepts in its last pass; "
                    f"{ahead} of {vc.pending} pending jobs of VC {vc.name} arrived earlier; {vc.free} GPUs free{eta}")
        return (f"queued by dlsched ({self.policy.name}): {ahead} of {vc.pending} pending jobs of VC {vc.name} "
                f"go first; {vc.free} GPUs free{eta}{self._reclaiming(vc)}")

    def _reclaiming(self, vc) -> str:
        """'' or, for a VC whose lent GPUs are being taken back, how many and from which queues."""
        quotas = self.kernel.quotas
        if quotas is None or not quotas.evicting:
            return ""
        going = [j for j, lender in quotas.evicting.items() if lender is vc]
        if not going:
            return ""
        queues = ", ".join(sorted({j.vc_state.name for j in going}))
        return f"; {sum(j.gpus for j in going)} GPUs being reclaimed from queue {queues}"

    def _ahead(self, job: Job) -> int:
        """How many pending jobs of the job's VC go before it: a binary search in the VC's
        sorted ranks, sorted again only when its queue may have changed (a job entered or left
        it, or a pass ran: passes are where keys are assigned), not a walk of the whole queue
        on every filter of every waiting pod. A NaN key (no total order) counts by the walk."""
        vc = job.vc_state
        stamp = (self.passes, self.state.enqueued, len(vc.queue))
        cached = self._ranks.get(vc.vid)
        if cached is None or cached[0] != stamp:
            ranks = sorted(map(self._rank, vc.queue))
            cached = self._ranks[vc.vid] = (stamp, ranks, any(r[0] != r[0] for r in ranks))
        mine = self._rank(job)
        if cached[2] or mine[0] != mine[0]:
            return sum(1 for rank in cached[1] if rank < mine)
        return bisect_left(cached[1], mine)

    def _rank(self, job: Job) -> tuple:
        """A pending job's place in the policy's queue order: its key, or for a policy whose
        queue has none (Horus, Horus-f: arrival order, their rounds decide) its arrival."""
        return (self.policy.key(job), job.enq_seq) if self.keyed else (job.enq_seq,)

    def begin_bind(self, uid: str, node: str) -> tuple[PodFacts, list[int] | None]:
        """Check a bind against the nomination; returns the pod and its GPU indices (None: a
        pending pod that requests no GPU, bound untouched)."""
        with self.lock:
            if self.gangs.owns(uid):   # gang hook
                return self.gangs.begin_bind(self, uid, node)
            job = self.jobs.get(uid)
            if job is None and uid in self.zero_gpu:
                return self.zero_gpu[uid], None
            if job is None:
                raise BindError(f"dlsched has no pending pod with uid {uid}")
            if job.state is not ASSUMED:
                raise BindError(f"pod {self.pods[uid].key} is {job.state.name.lower()}, not nominated")
            nominated = self.state.node_ids[job.placement[0][0]]
            if nominated != node:
                raise BindError(f"pod {self.pods[uid].key} is nominated for {nominated}, not {node}")
            return self.pods[uid], [g for g, _ in self.slots[uid]]

    def end_bind(self, uid: str, node: str, error: str) -> None:
        """The API server answered the bind: confirm the start, or forget it (GPUs return)."""
        with self.lock:
            job = self.jobs.get(uid)
            if job is None or job.state is not ASSUMED:
                return   # the watch got there first (bound, or the pod was deleted)
            if error:
                self._forget(job, f"bind failed: {error}")
                return
            self._handle(BindSucceeded(job))
            self.store.bound(uid, self.pods[uid].key, node, self._gpus_text(uid), self.now(), kind="bind")
            self._record("confirm", uid=uid)

    # -- observations (node agent) -------------------------------------------------------------
    def observe(self, uid: str, util: float, mem_mib: float, warmup: float, speed: float = float("nan")) -> str:
        """A node agent's reading of a running pod: kept for the operator's predicted-vs-observed view;
        once the pod has run ``warmup`` seconds it replaces the predictions (the simulator's
        :class:`~dlsched.sim.observe.ObservedCorrection`). ``speed``, when the pod's framework reports
        it, is its throughput relative to running alone: the job's observed rate, which PAB's check
        reads (in a simulation the physics sets it). Returns what happened."""
        with self.lock:
            job = self.jobs.get(uid)
            if job is None or job.state is not RUNNING:
                return "unknown"
            now = self.now()
            if speed == speed:   # an observation, as the reading of utilisation is
                job.speed = speed
                self._record("speed", uid=uid, speed=speed)
            self.observed[uid] = (util, mem_mib, now)
            if (cal := getattr(self.predict, "calibration", None)) is not None:
                cal.observe(uid, mem_mib)   # the cluster's memory calibration learns from every peak
            self._record("observe", uid=uid, gpu_util=util, gpu_mem_mib=mem_mib)
            over = self._over_memory(job, mem_mib)
            if over:
                self._oom(job, mem_mib, over, now)
                return "oom"
            if now - job.run_since < warmup:
                return "warming up"
            if observe(job, util, mem_mib, now):
                self._handle(PredictionCorrected(job), now)   # the sharing load index re-reads its GPUs
            return "corrected"

    def _over_memory(self, job: Job, mem_mib: float) -> str:
        """Why the reading means the job ran out of GPU memory, or ''. Over the GPU alone; or, on a
        shared GPU, the holders' memory (observed, else predicted) over it, with this job the
        newest holder (the one whose allocation fails)."""
        if mem_mib != mem_mib:
            return ""
        st = self.state
        for idx, mask in job.placement or ():
            cap = st.node_mem[idx]
            if mem_mib > cap:
                return f"observed {mem_mib:.0f} MiB on a {cap:.0f} MiB GPU"
            for g in gpu_list(mask):
                holders = st.gpu_holders(idx, g)
                if len(holders) < 2 or max(h.run_seq for h in holders) != job.run_seq:
                    continue
                total = sum(self._seen_mem(h) for h in holders)
                if total > cap:
                    return f"GPU {g} of {st.node_ids[idx]} holds {total:.0f} MiB of {cap:.0f} MiB"
        return ""

    def _seen_mem(self, job: Job) -> float:
        seen = self.observed.get(job.job_id)
        if seen is not None and seen[1] == seen[1]:
            return seen[1]
        return job.pred_gpu_mem_mib if job.pred_gpu_mem_mib == job.pred_gpu_mem_mib else 0.0

    def _oom(self, job: Job, mem_mib: float, why: str, now: float) -> None:
        """The OOM failover, as in the simulator: GPUs freed, the job queued again with its
        observed memory, and the policy's ``job_failed`` told (it corrects the prediction)."""
        uid = job.job_id
        pod = self.pods[uid]
        reason = f"out of GPU memory: {why}"
        job.observed_mem_mib = mem_mib
        self._correct_partners(job, now)
        self._handle(JobFailed(job, reason), now)   # GPUs freed, queued again, the policy's job_failed
        self.slots.pop(uid, None)
        self.observed.pop(uid, None)
        self.waiting[uid] = reason
        self.store.release(uid, pod.key, "oom", now, detail=reason)
        self._record("oom", uid=uid, why=reason, gpu_mem_mib=mem_mib)

    def _correct_partners(self, job: Job, now: float) -> None:
        """Co-runners on the failed job's GPUs whose agent reading is above their predicted memory
        get that reading as their prediction now (as the simulator's OOM model does), even inside
        their warm-up: otherwise the failed pod is re-placed beside a partner that is bigger than the
        policy believes, and the same collision repeats."""
        st = self.state
        for idx, mask in job.placement or ():
            for g in gpu_list(mask):
                for h in st.gpu_holders(idx, g):
                    seen = self.observed.get(h.job_id)
                    if h is job or seen is None or not seen[1] > h.pred_gpu_mem_mib:
                        continue
                    observe(h, float("nan"), seen[1], seen[2])
                    self._handle(PredictionCorrected(h), now)
                    self._record("corrected", uid=h.job_id, gpu_mem_mib=seen[1], why=f"co-runner of {job.job_id} ran out of memory")

    # -- the operator's view -----------------------------------------------------------------
    def snapshot(self) -> dict:
        with self.lock:
            st = self.state
            nodes = []
            for idx, name in enumerate(st.node_ids):
                if st.node_removed[idx]:
                    continue
                nodes.append({"name": name, "vc": st.vcs[st.node_vc[idx]].name, "gpus": st.node_gpus[idx],
                              "cordoned": st.node_cordoned[idx],
                              "holders": {self.pods[j.job_id].key: gpu_list(m)
                                          for j, m in st.node_holders[idx].items() if j.job_id in self.pods},
                              "gpu_mem_mib": st.node_mem[idx],
                              "pods": [{"uid": j.job_id, "pod": self.pods[j.job_id].key, "gpus": gpu_list(m),
                                        "state": j.state.name.lower()}
                                       for j, m in st.node_holders[idx].items() if j.job_id in self.pods]})
            return {"policy": self.policy.name, "nodes": nodes, "running": st.n_running, "pending": st.n_pending,
                    "passes": self.passes, "counters": {**self.counters, **self.gangs.counters},
                    "gangs": self.gangs.rows(self),   # gang hook
                    "vcs": [{"name": vc.name, "gpus": vc.total_gpus, "free": vc.free, "pending": vc.pending}
                            for vc in st.vcs]}

    def queue(self) -> list[dict]:
        etas = self.eta.etas()   # refreshed when the state changed; the forward run holds no lock
        with self.lock:
            now = self.now()
            out = []
            for vc in self.state.vcs:
                jobs = sorted(vc.queue, key=self._rank)
                for rank, job in enumerate(jobs):
                    out.append({"pod": self.pods[job.job_id].key, "uid": job.job_id, "vc": vc.name, "rank": rank,
                                "gpus": job.gpus, "priority": _num(job.priority),
                                "reason": self.waiting.get(job.job_id, ""), **_eta(etas.get(job.job_id), now)})
            for uid, pod in self.parked.items():
                out.append({"pod": pod.key, "uid": uid, "vc": self.vcs.vc_of(pod), "rank": -1, "gpus": pod.gpus,
                            "priority": None, "reason": self.waiting.get(uid, ""), **_eta(None, now)})
            return out


def _priority(total: float) -> int:
    """A placement score in [0, 1] (clipped) as an extender priority in 1..PRIORITY_TOP + 1."""
    return 1 + int(PRIORITY_TOP * (0.0 if total < 0.0 else 1.0 if total > 1.0 else total) + 0.5)


def _eta(t: float | None, now: float) -> dict:
    """The queue's ETA fields: the estimated start (service clock) and seconds from now; None where
    there is no estimate (not yet refreshed, a parked pod, or no start in the forward run)."""
    if t is None or t == float("inf"):
        return {"eta": None, "eta_in_s": None}
    return {"eta": t, "eta_in_s": max(0.0, t - now)}


def _num(x: float) -> float | None:
    return None if x != x else x


__all__ = ["BindError", "SchedulerCore", "StateError"]
