"""The live adapter's pod book: which pod is which kernel job, and what is known of the pods that
are none (yet).

Kept apart from the adapter's rules so that every part (the adapter, nominations, gangs,
evictions, the operator's views) reads and updates one set of tables by their public names:
pod uid -> job, its latest facts, why it waits, pods parked until they can be jobs, the uids
that ended (a late copy is never adopted again), namespace/name -> uid as the API server has
it, pods known from filter calls only, the nodes kube-scheduler offered, agent readings, the
last filter answer, pending pods that request no GPU, and deleted nodes still holding pods.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from collections.abc import Callable

from dlsched.core.job import Job
from dlsched.service.pods import (
    BATCH_ANNOTATION,
    MODEL_ANNOTATION,
    USER_ANNOTATION,
    PodFacts,
    job_name,
    pod_limit,
    training_annotations,
)

ENDED_KEPT = 100_000   # uids of ended pods remembered, so that a stale copy is not adopted again
ZERO_GPU_KEPT = 10_000  # pending pods that request no GPU, remembered for their bind


class PodBook:
    """The tables of pods the live service knows, keyed by pod uid unless said otherwise."""

    def __init__(self) -> None:
        self.jobs: dict[str, Job] = {}            # pod uid -> job (pending, assumed or running)
        self.pods: dict[str, PodFacts] = {}        # pod uid -> latest facts of a pod with a job
        self.waiting: dict[str, str] = {}          # pod uid -> why it is not placed (no job / postponed)
        self.parked: dict[str, PodFacts] = {}      # pods that cannot be jobs yet (unknown VC or node)
        self.gone_nodes: set[str] = set()          # deleted nodes still holding pods (removed when empty)
        # names a filter call need not wait for: nodes seen without GPUs (ignored, but not unknown),
        # and offered nodes that a held call waited for in vain (never waited for again until seen)
        self.not_awaited: set[str] = set()
        self.ended: OrderedDict[str, None] = OrderedDict()   # uids of pods that ended (the newest ENDED_KEPT)
        self.observed: dict[str, tuple[float, float, float]] = {}   # pod uid -> (util, mem MiB, at) last read
        self.key_uid: dict[str, str] = {}          # namespace/name -> uid, as the API server has it
        self.unseen: dict[str, float] = {}         # uid -> when a pod known from a filter call only was submitted
        self.offered: dict[str, frozenset[str]] = {}   # uid -> the nodes kube-scheduler offered in its last filter
        self.last_outcome: dict[str, str] = {}     # uid -> the last filter answer (nominated / waiting / ...)
        self.zero_gpu: OrderedDict[str, PodFacts] = OrderedDict()   # pending pods requesting no GPU

    def add(self, pod: PodFacts, job: Job) -> None:
        """``pod`` is the job ``job`` from now on."""
        self.jobs[pod.uid] = job
        self.pods[pod.uid] = pod

    def unpark(self, uid: str) -> None:
        """The pod is no longer parked nor waiting for a reason of its own."""
        self.parked.pop(uid, None)
        self.waiting.pop(uid, None)

    def park(self, pod: PodFacts, why: str) -> None:
        self.parked[pod.uid] = pod
        self.waiting[pod.uid] = why

    def drop(self, uid: str, key: str) -> None:
        """Forget the job of pod ``uid`` (namespace/name ``key``) and remember that the uid ended."""
        for table in (self.jobs, self.pods, self.waiting, self.observed, self.offered, self.last_outcome):
            table.pop(uid, None)
        self.ended[uid] = None
        if len(self.ended) > ENDED_KEPT:
            self.ended.popitem(last=False)
        if self.key_uid.get(key) == uid:
            del self.key_uid[key]

    def zero_gpu_seen(self, pod: PodFacts) -> None:
        """A pod that requests no GPU is never a job; its bind (kube-scheduler sends it to the
        extender when ``nvidia.com/gpu: 0`` is listed) binds it untouched."""
        if pod.node_name or pod.terminal:
            self.zero_gpu.pop(pod.uid, None)
            return
        self.zero_gpu[pod.uid] = pod
        self.zero_gpu.move_to_end(pod.uid)
        if len(self.zero_gpu) > ZERO_GPU_KEPT:
            self.zero_gpu.popitem(last=False)


def job_of(pod: PodFacts, vc: str, now: Callable[[], float], predict: Callable[[Job], None] | None,
           counters: Counter[str]) -> Job:
    """The kernel job of a pod: its GPUs, submit time, user, name (the duration key), model and
    batch size from its annotations, its time limit (service/live_limits.py), and the
    predictions of ``predict`` when it names a model.
    Bad annotations are counted in ``counters``, not refused."""
    ann = pod.annotations
    model = str(ann.get(MODEL_ANNOTATION) or "")
    try:
        batch = int(ann.get(BATCH_ANNOTATION) or 0)
    except (TypeError, ValueError):
        batch, _ = 0, counters.update(["bad batch-size annotations"])
    job = Job(pod.uid, vc, pod.gpus, pod.created or now(), float("nan"),
              user=str(ann.get(USER_ANNOTATION) or pod.namespace), name=job_name(pod),
              model_name="" if model.endswith(".onnx") else model,
              onnx_ref=model if model.endswith(".onnx") else "", batch_size=max(batch, 0))
    meta, bad = training_annotations(ann)
    job.attention, job.stack = meta["attention"], meta["stack"]
    counters.update(["bad attention annotations"] * len(bad))
    job.time_limit_s, _, bad_limit = pod_limit(pod)   # its max runtime: none unless the pod gives one
    if bad_limit:
        counters["bad time-limit annotations (ignored)"] += 1
    if predict is not None and model:
        predict(job)
        if job.pred_gpu_mem_mib != job.pred_gpu_mem_mib:
            counters["model annotations without a prediction"] += 1
    return job
