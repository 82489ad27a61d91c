"""A stand-in for ``dlsched.service.nodefit`` (being written on its own branch), with the same
names and return shapes, used by :mod:`.fit` only while that package is absent. It checks what
a scheduler of its own cannot leave out: cordoned and NotReady nodes, ``nodeSelector``, taints
(NoSchedule, NoExecute) against tolerations, and cpu / memory / pods / extended requests against
allocatable minus the pods on the node. Required node affinity, inter-pod affinity, topology
spread and volumes are reported by :func:`unsupported` (the pod is then never placed).
Delete this file once ``service/nodefit`` is merged.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass, field

_SUFFIX = {"": 1, "m": 1e-3, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18,
           "Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6}
_QTY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei)?$")


@dataclass
class FitResult:
    """The nodes a pod may go to, why each other node may not, one kube-scheduler-style message."""

    nodes: list[str]
    reasons: dict[str, str] = field(default_factory=dict)
    message: str = ""
    scores: dict[str, float] = field(default_factory=dict)


def quantity(value: object) -> float:
    """A Kubernetes quantity ("500m", "4Gi", 2) as a number; ValueError when it is none."""
    m = _QTY.match(str(value).strip())
    if m is None:
        raise ValueError(f"{value!r} is not a quantity")
    return float(m.group(1)) * _SUFFIX[m.group(2) or ""]


def requests(pod: dict) -> dict[str, float]:
    """The pod's requests: the sum over its containers (a limit stands in for a missing request),
    at least each init container's, and one ``pods``."""
    spec = pod.get("spec") or {}
    total: Counter = Counter()
    for c in spec.get("containers") or []:
        res = c.get("resources") or {}
        for name, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] += quantity(v)
    for c in spec.get("initContainers") or []:
        res = c.get("resources") or {}
        for name, v in {**(res.get("limits") or {}), **(res.get("requests") or {})}.items():
            total[name] = max(total[name], quantity(v))
    total["pods"] += 1
    return dict(total)


def _tolerated(taint: dict, tolerations: list[dict]) -> bool:
    for t in tolerations:
        if t.get("effect") and t.get("effect") != taint.get("effect"):
            continue
        if not t.get("key"):
            if t.get("operator") == "Exists":
                return True
            continue
        if t.get("key") != taint.get("key"):
            continue
        if t.get("operator") == "Exists" or (t.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def _why_not(pod: dict, need: dict[str, float], node: dict, on_node: list[dict]) -> str:
    spec, nspec = pod.get("spec") or {}, node.get("spec") or {}
    labels = (node.get("metadata") or {}).get("labels") or {}
    if nspec.get("unschedulable"):
        return "node(s) were unschedulable"
    for cond in (node.get("status") or {}).get("conditions") or []:
        if cond.get("type") == "Ready" and cond.get("status") != "True":
            return "node(s) were not ready"
    for key, value in (spec.get("nodeSelector") or {}).items():
        if labels.get(key) != value:
            return "node(s) didn't match Pod's node affinity"   # v1.20's words for a selector too
    tolerations = spec.get("tolerations") or []
    for taint in nspec.get("taints") or []:
        if taint.get("effect") in ("NoSchedule", "NoExecute") and not _tolerated(taint, tolerations):
            return "node(s) had taint that the pod didn't tolerate"
    alloc = (node.get("status") or {}).get("allocatable") or {}
    used: Counter = Counter()
    for other in on_node:
        used.update(requests(other))
    for name, amount in need.items():
        if amount <= 0:
            continue
        have = quantity(alloc[name]) if name in alloc else 0.0
        if used[name] + amount > have:
            return "Too many pods" if name == "pods" else f"Insufficient {name}"
    return ""


def feasible(pod: dict, nodes: list[dict], pods_by_node: dict[str, list[dict]]) -> FitResult:
    """Which of ``nodes`` the pod passes; the others with their reason and a summary message."""
    need = requests(pod)
    ok: list[str] = []
    reasons: dict[str, str] = {}
    for node in nodes:
        name = (node.get("metadata") or {}).get("name", "")
        why = _why_not(pod, need, node, pods_by_node.get(name, []))
        if why:
            reasons[name] = why
        else:
            ok.append(name)
    counts = Counter(reasons.values())
    message = "" if ok else (f"0/{len(nodes)} nodes are available: "
                             + ", ".join(f"{n} {why}" for why, n in sorted(counts.items())) + ".")
    return FitResult(ok, reasons, message, {n: 0.0 for n in ok})


def unsupported(pod: dict) -> list[str]:
    """What the pod asks for that this check does not evaluate (each a short phrase)."""
    spec = pod.get("spec") or {}
    aff = spec.get("affinity") or {}
    out = []
    if (aff.get("nodeAffinity") or {}).get("requiredDuringSchedulingIgnoredDuringExecution"):
        out.append("required node affinity")
    if aff.get("podAffinity"):
        out.append("inter-pod affinity")
    if aff.get("podAntiAffinity"):
        out.append("inter-pod anti-affinity")
    if spec.get("topologySpreadConstraints"):
        out.append("topology spread constraints")
    if any("persistentVolumeClaim" in v for v in spec.get("volumes") or []):
        out.append("persistent volume claims")
    return out


def _stamp() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def unschedulable_condition(message: str) -> dict:
    """The ``PodScheduled`` condition kube-scheduler writes for a pod it cannot place."""
    return {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message[:1024],
            "lastProbeTime": None, "lastTransitionTime": _stamp()}


def failed_scheduling_event(pod: dict, message: str, scheduler_name: str) -> dict:
    """A ``FailedScheduling`` Warning event on the pod, as kube-scheduler writes it."""
    meta = pod.get("metadata") or {}
    ns = meta.get("namespace") or "default"
    stamp = _stamp()
    return {"apiVersion": "v1", "kind": "Event",
            "metadata": {"generateName": f"{meta.get('name', 'pod')}.", "namespace": ns},
            "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": ns, "name": meta.get("name"),
                               "uid": meta.get("uid"), "resourceVersion": meta.get("resourceVersion")},
            "reason": "FailedScheduling", "message": message[:1024], "type": "Warning",
            "source": {"component": scheduler_name}, "reportingComponent": scheduler_name,
            "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
