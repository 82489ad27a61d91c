"""The node checks of the scheduler mode (``dlsched.service.nodefit``), through one function each.

GPUs are the kernel's to count (it holds every bound pod's GPUs, whoever placed it, and may
share a GPU between pods): the pod's ``nvidia.com/gpu`` request is taken out before the node
checks, which then judge everything else a node must have for it.
"""

from __future__ import annotations

from dlsched.service import nodefit
from dlsched.service.pods import GPU_RESOURCE

FitResult = nodefit.FitResult


def without_gpus(pod: dict) -> dict:
    """A shallow copy of ``pod`` whose containers request no ``nvidia.com/gpu``."""
    spec = dict(pod.get("spec") or {})
    for key in ("containers", "initContainers"):
        out = []
        for c in spec.get(key) or []:
            res = c.get("resources") or {}
            res = {k: {n: v for n, v in (res.get(k) or {}).items() if n != GPU_RESOURCE}
                   for k in ("limits", "requests")}
            out.append({**c, "resources": res})
        if key in spec:
            spec[key] = out
    return {**pod, "spec": spec}


def feasible(pod: dict, nodes: list[dict], pods_by_node: dict[str, list[dict]],
             gpu_binding: bool = False) -> FitResult:
    """The nodes ``pod`` may run on as far as anything but GPUs goes (see the module doc);
    ``gpu_binding``: a pod the GPU-binding webhook mutated also needs a node where its choice binds."""
    return nodefit.feasible(without_gpus(pod), nodes, pods_by_node, gpu_binding)


def unsupported(pod: dict) -> list[str]:
    """What the pod asks for that dlsched does not evaluate (it is then never placed)."""
    return list(nodefit.unsupported(pod))


def reason_of(result: FitResult, node: str) -> str:
    """Why ``node`` failed, as one line (nodefit lists every check a node fails)."""
    why = result.reasons.get(node) or result.message
    return "; ".join(why) if isinstance(why, (list, tuple)) else str(why)


def unsupported_text(items: list[str], scheduler_name: str) -> str:
    """The condition/event message for a pod left pending because of ``items``."""
    own = getattr(nodefit, "unsupported_message", None)
    if own is not None:
        return own(items, scheduler_name)
    return f"{scheduler_name} does not evaluate {', '.join(items)}: the pod is not placed (use kube-scheduler for it)"


def unschedulable_condition(message: str) -> dict:
    return nodefit.unschedulable_condition(message)


def failed_scheduling_event(pod: dict, message: str, scheduler_name: str) -> dict:
    return nodefit.failed_scheduling_event(pod, message, scheduler_name)
