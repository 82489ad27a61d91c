"""Kubernetes pods and nodes as the service sees them: plain dicts (the API's JSON) -> typed facts.

The extender receives pods in the API server's JSON; the watch gets them from the official
client (converted to the same JSON by ``ApiClient.sanitize_for_serialization``). Both go
through :func:`pod_facts` so that one pod means one thing whichever way it arrived.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime

GPU_RESOURCE = "nvidia.com/gpu"
GPUS_ANNOTATION = "dlsched.io/gpus"          # written at bind: the GPU indices on the node, e.g. "0,1"
NOMINATED_ANNOTATION = "dlsched.io/nominated"   # "NODE TIME": written to nudge kube-scheduler (a pod update)
VC_LABEL = "dlsched.io/vc"                   # on pods and nodes: the virtual cluster
MODEL_ANNOTATION = "dlsched.io/model"        # ONNX reference or model name (for the predictors)
BATCH_ANNOTATION = "dlsched.io/batch-size"
USER_ANNOTATION = "dlsched.io/user"
NAME_ANNOTATION = "dlsched.io/name"            # the job's name for duration predictions (else: job_name)
GPU_TYPE_LABEL = "dlsched.io/gpu-type"
MOVED_GPUS_ANNOTATION = "dlsched.io/gpu-request"        # the nvidia.com/gpu count the GPU-binding webhook moved
MOVED_CONFIGMAP_ANNOTATION = "dlsched.io/gpu-configmap"  # the ConfigMap it pointed the containers at
ATTENTION_ANNOTATION = "dlsched.io/attention"  # eager | fused | memory_efficient (memory predictor)
STACK_ANNOTATION = "dlsched.io/stack"          # software-stack label: memory context and calibration key
# A max runtime in dlsched's run time (seconds, across evictions), which dlsched enforces itself;
# without it a pod's limit is its spec.activeDeadlineSeconds (the kubelet's, from the pod's start).
TIME_LIMIT_ANNOTATION = "dlsched.io/time-limit-seconds"
DEADLINE_EXCEEDED = "DeadlineExceeded"   # status.reason of a pod the kubelet stopped at its activeDeadlineSeconds
# Node labels for GPU sharing: memory per GPU (MiB; else the GPU type's), and how many units of
# nvidia.com/gpu one physical GPU is advertised as (a time-slicing device plugin's replicas).
# dlsched's own labels win over those NVIDIA's GPU feature discovery writes.
GPUS_MAX = 1024   # the most GPUs read from a pod's request or a node
GPU_MEMORY_MAX_MIB = 1 << 24   # the most MiB per GPU read from a node's label
GPU_MEMORY_LABELS = ("dlsched.io/gpu-memory-mib", "nvidia.com/gpu.memory")
GPU_REPLICAS_LABELS = ("dlsched.io/gpu-replicas", "nvidia.com/gpu.replicas")


def training_annotations(ann: dict) -> tuple[dict[str, str], list[str]]:
    """The memory predictor's job metadata from a pod's annotations: ``({"attention", "stack"},
    [bad values])``; a bad attention mode is reported and left to the default (fused)."""
    from dlsched.predictors.resources.train_memory import ATTENTION_MODES

    att = str(ann.get(ATTENTION_ANNOTATION) or "").strip().lower().replace("-", "_")
    bad = [] if att in ("", *ATTENTION_MODES) else [f"{ATTENTION_ANNOTATION}={att!r}"]
    return {"attention": "" if bad else att, "stack": str(ann.get(STACK_ANNOTATION) or "").strip()[:63]}, bad


class PodError(ValueError):
    """A pod or node object the service cannot read (the reason names the field)."""


def parse_quantity(value: object, what: str) -> int:
    """A whole-number Kubernetes quantity (GPU counts are integers: "2", 2)."""
    if isinstance(value, bool):
        raise PodError(f"{what}: {value!r} is not a whole number")
    if isinstance(value, int):
        n = value
    elif isinstance(value, str) and value.strip().isdigit():
        n = int(value.strip())
    else:
        raise PodError(f"{what}: {value!r} is not a whole number")
    if n < 0 or n > GPUS_MAX:
        raise PodError(f"{what}: {n} is out of range 0..{GPUS_MAX}")
    return n


def _dict(obj: object, what: str) -> dict:
    if obj is None:
        return {}
    if not isinstance(obj, dict):
        raise PodError(f"{what} must be an object, got {type(obj).__name__}")
    return obj


def parse_time(value: object) -> float:
    """An RFC 3339 timestamp (``2026-11-22T14:50:43Z``) as epoch seconds; 0 when absent."""
    if not value:
        return 0.0
    if isinstance(value, datetime):
        return value.timestamp()
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
    except ValueError:
        raise PodError(f"metadata.creationTimestamp: {value!r} is not an RFC 3339 time") from None


def parse_gpu_list(text: str, gpus_on_node: int) -> tuple[int, ...] | None:
    """The ``dlsched.io/gpus`` annotation as GPU indices; None when malformed or out of range."""
    try:
        idx = tuple(int(x) for x in text.split(",") if x.strip() != "")
    except ValueError:
        return None
    if not idx or len(set(idx)) != len(idx) or any(g < 0 or g >= gpus_on_node for g in idx):
        return None
    return idx


@dataclass(frozen=True, slots=True)
class PodFacts:
    """What scheduling needs from a pod."""

    uid: str
    namespace: str
    name: str
    gpus: int
    node_name: str = ""
    phase: str = "Pending"
    deleting: bool = False
    created: float = 0.0
    scheduler_name: str = "default-scheduler"
    labels: dict = field(default_factory=dict)
    annotations: dict = field(default_factory=dict)
    owner_uid: str = ""        # the controlling owner's uid (a Job, ReplicaSet ...): matches a re-created pod
    generate_name: str = ""    # metadata.generateName: the name prefix a controller gives its pods
    owner: str = ""   # the controller owner as "Kind/name/uid" (a gang by owner: service/gangs.py)
    deadline_s: int | None = None   # spec.activeDeadlineSeconds (None: none)
    reason: str = ""                # status.reason (``DeadlineExceeded``: the kubelet stopped it at its deadline)
    started: float = 0.0            # status.startTime (0: no kubelet has started it)
    scheduled: float = 0.0          # the PodScheduled condition's lastTransitionTime: its bind (0: unknown)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def terminal(self) -> bool:
        """The pod no longer holds its GPUs: finished, failed or being deleted."""
        return self.phase in ("Succeeded", "Failed") or self.deleting


ANNOTATION, DEADLINE = "annotation", "deadline"   # where a pod's time limit comes from


def pod_limit(pod: PodFacts) -> tuple[float | None, str, str]:
    """``(seconds, source, bad)``: the pod's limit (None: none), where it comes from
    (:data:`ANNOTATION`, :data:`DEADLINE` or ''), and the annotation's bad value ('' when fine;
    a bad one is not a limit: the deadline, if any, applies)."""
    raw = pod.annotations.get(TIME_LIMIT_ANNOTATION)
    bad = ""
    if raw is not None and str(raw).strip() != "":
        try:
            value = float(str(raw).strip())
        except ValueError:
            value = math.nan
        if value > 0 and math.isfinite(value):
            return value, ANNOTATION, ""
        bad = f"{TIME_LIMIT_ANNOTATION}={raw!r} (not a number of seconds > 0)"
    if pod.deadline_s is not None:
        return float(pod.deadline_s), DEADLINE, bad
    return None, "", bad


def pod_facts(pod: object) -> PodFacts:
    """Read a pod object (API JSON). Raises :class:`PodError` naming the bad field."""
    pod = _dict(pod, "Pod")
    meta = _dict(pod.get("metadata"), "Pod.metadata")
    spec = _dict(pod.get("spec"), "Pod.spec")
    status = _dict(pod.get("status"), "Pod.status")
    uid, name, ns = meta.get("uid"), meta.get("name"), meta.get("namespace") or "default"
    for what, v in (("uid", uid), ("name", name), ("namespace", ns)):
        if not isinstance(v, str) or not v or len(v) > 253:
            raise PodError(f"Pod.metadata.{what} must be a non-empty string of at most 253 characters")
    containers = spec.get("containers") or []
    if not isinstance(containers, list):
        raise PodError("Pod.spec.containers must be a list")
    gpus = 0
    for i, c in enumerate(containers):
        res = _dict(_dict(c, f"Pod.spec.containers[{i}]").get("resources"), f"containers[{i}].resources")
        req = _dict(res.get("requests"), "resources.requests")
        lim = _dict(res.get("limits"), "resources.limits")
        value = req.get(GPU_RESOURCE, lim.get(GPU_RESOURCE))  # extended resources: request = limit
        if value is not None:
            gpus += parse_quantity(value, f"Pod.spec.containers[{i}].resources {GPU_RESOURCE}")
    labels = _dict(meta.get("labels"), "Pod.metadata.labels")
    annotations = _dict(meta.get("annotations"), "Pod.metadata.annotations")
    if not gpus and MOVED_CONFIGMAP_ANNOTATION in annotations and MOVED_GPUS_ANNOTATION in annotations:
        # --gpu-binding envvar-configmap: the webhook moved the request here (service/gpu_binding/)
        gpus = parse_quantity(annotations[MOVED_GPUS_ANNOTATION], f"Pod.metadata.annotations {MOVED_GPUS_ANNOTATION}")
    node = spec.get("nodeName") or ""
    phase = status.get("phase") or "Pending"
    if not isinstance(node, str) or not isinstance(phase, str):
        raise PodError("Pod.spec.nodeName and Pod.status.phase must be strings")
    owner = _controller(meta.get("ownerReferences"))
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and (isinstance(deadline, bool) or not isinstance(deadline, int) or deadline < 1):
        raise PodError(f"Pod.spec.activeDeadlineSeconds: {deadline!r} is not a whole number of seconds >= 1")
    try:
        started = parse_time(status.get("startTime"))
    except PodError:
        raise PodError(f"Pod.status.startTime: {status.get('startTime')!r} is not an RFC 3339 time") from None
    return PodFacts(uid, ns, name, gpus, node, phase, bool(meta.get("deletionTimestamp")),
                    parse_time(meta.get("creationTimestamp")), str(spec.get("schedulerName") or "default-scheduler"),
                    labels, annotations, owner.rsplit("/", 1)[-1] if owner else "",
                    str(meta.get("generateName") or ""), owner, deadline, str(status.get("reason") or ""), started,
                    _scheduled_at(status.get("conditions")))


def _scheduled_at(conditions: object) -> float:
    """When the pod was bound: the API server's binding sets the ``PodScheduled`` condition
    true and stamps its ``lastTransitionTime``. 0 when there is none or it does not parse (an
    unknown bind time: a caller then counts from when it saw the pod)."""
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, dict) and c.get("type") == "PodScheduled" and c.get("status") == "True":
            try:
                return parse_time(c.get("lastTransitionTime"))
            except PodError:
                return 0.0
    return 0.0


def _controller(refs: object) -> str:
    """The controller among a pod's ownerReferences as ``Kind/name/uid``; '' when none."""
    for ref in refs if isinstance(refs, list) else ():
        if isinstance(ref, dict) and ref.get("controller") and all(isinstance(ref.get(k), str) for k in
                                                                     ("kind", "name", "uid")):
            return f"{ref['kind']}/{ref['name']}/{ref['uid']}"
    return ""


@dataclass(frozen=True, slots=True)
class NodeFacts:
    """What scheduling needs from a node."""

    name: str
    gpus: int
    vc: str
    gpu_type: str
    cordoned: bool
    gpu_mem_mib: int = 0      # memory per GPU from a node label; 0: the GPU type's
    replicas: int = 1         # nvidia.com/gpu units per physical GPU (time-slicing)


def _label_number(labels: dict, keys: tuple[str, ...], name: str, low: int, high: int) -> int:
    """The first of ``keys`` present in ``labels`` as a whole number in [low, high]; 0 when none."""
    for key in keys:
        value = labels.get(key)
        if value is None or value == "":
            continue
        text = str(value).strip()
        if not text.isdigit() or not low <= int(text) <= high:
            raise PodError(f"Node {name} label {key}: {value!r} is not a whole number in {low}..{high}")
        return int(text)
    return 0


def node_facts(node: object, default_vc: str = "default") -> NodeFacts:
    node = _dict(node, "Node")
    meta = _dict(node.get("metadata"), "Node.metadata")
    name = meta.get("name")
    if not isinstance(name, str) or not name or len(name) > 253:
        raise PodError("Node.metadata.name must be a non-empty string of at most 253 characters")
    status = _dict(node.get("status"), "Node.status")
    alloc = _dict(status.get("allocatable") or status.get("capacity"), "Node.status.allocatable")
    gpus = parse_quantity(alloc.get(GPU_RESOURCE, 0), f"Node {name} allocatable {GPU_RESOURCE}")
    labels = _dict(meta.get("labels"), "Node.metadata.labels")
    spec = _dict(node.get("spec"), "Node.spec")
    mem = _label_number(labels, GPU_MEMORY_LABELS, name, 1, GPU_MEMORY_MAX_MIB)
    replicas = _label_number(labels, GPU_REPLICAS_LABELS, name, 1, 64) or 1
    return NodeFacts(name, gpus // replicas, str(labels.get(VC_LABEL) or default_vc),
                     str(labels.get(GPU_TYPE_LABEL) or ""), bool(spec.get("unschedulable")), mem, replicas)


@dataclass(slots=True)
class VcMapping:
    """Which virtual cluster a pod belongs to: its ``dlsched.io/vc`` label, else its namespace's
    entry in ``namespaces``, else ``default``."""

    namespaces: dict[str, str] = field(default_factory=dict)
    default: str = "default"

    def vc_of(self, pod: PodFacts) -> str:
        label = pod.labels.get(VC_LABEL)
        if isinstance(label, str) and label:
            return label
        return self.namespaces.get(pod.namespace, self.default)

    @classmethod
    def parse(cls, text: str, default: str = "default") -> VcMapping:
        """``ns=vc,ns2=vc2`` (from the command line)."""
        out: dict[str, str] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            ns, sep, vc = part.partition("=")
            if not sep or not ns.strip() or not vc.strip():
                raise ValueError(f"--vc-map: {part!r} is not NAMESPACE=VC")
            ns, vc = ns.strip(), vc.strip()
            if out.get(ns, vc) != vc:   # the later one would win without a word
                raise ValueError(f"--vc-map: namespace {ns!r} is mapped twice ({out[ns]!r} and {vc!r})")
            out[ns] = vc
        return cls(out, default)


def job_name(pod: PodFacts) -> str:
    """The name a live job's duration prediction is keyed by (with its user: the
    ``dlsched.io/user`` annotation, else the namespace): the ``dlsched.io/name`` annotation, else
    the ``dlsched.io/job`` label (a gang's or a re-created job's name), else the name prefix the
    pod's controller gives it (``metadata.generateName`` less its trailing ``-``), else the pod's
    name. A controller's pods carry random suffixes (``train-x7k2p``) that would make every
    resubmission of the same job a name the estimator has never seen."""
    for value in (pod.annotations.get(NAME_ANNOTATION), pod.labels.get("dlsched.io/job")):
        if isinstance(value, str) and value.strip():
            return value.strip()
    prefix = pod.generate_name.rstrip("-")
    return prefix or pod.name
