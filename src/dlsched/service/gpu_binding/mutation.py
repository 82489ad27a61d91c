"""The webhook's mutation of a pod (pure functions: tested without any server).

A pod of dlsched's (``spec.schedulerName``) that requests ``nvidia.com/gpu`` in its containers
gets, in one JSON patch: the request removed from every container (the device plugin then
allocates nothing and sets no ``NVIDIA_VISIBLE_DEVICES`` of its own), the count kept in the
``dlsched.io/gpu-request`` annotation (the service reads its GPU count from there), and an
``envFrom`` reference to a ConfigMap of its own (named in ``dlsched.io/gpu-configmap``; the
name is made here because a pod created with ``generateName`` has no name yet at admission).
The reference is not optional: the kubelet does not start the container before dlsched wrote
the ConfigMap, which it does before the Binding.
"""

from __future__ import annotations

import base64
import json
import secrets

from dlsched.service.pods import GPU_RESOURCE
from dlsched.service.pods import MOVED_CONFIGMAP_ANNOTATION as CONFIGMAP_ANNOTATION
from dlsched.service.pods import MOVED_GPUS_ANNOTATION as GPU_REQUEST_ANNOTATION

RESERVATION_LABEL = "dlsched.io/reservation"    # "gpu" on every reservation pod (reservations.py)

__all__ = ["CONFIGMAP_ANNOTATION", "GPU_REQUEST_ANNOTATION", "GPU_RESOURCE", "plan", "review_response"]
CONFIGMAP_PREFIX = "dlsched-gpus-"


def _escape(key: str) -> str:
    """A JSON pointer token (RFC 6901): '~' -> '~0', '/' -> '~1'."""
    return key.replace("~", "~0").replace("/", "~1")


def _gpu_count(container: dict) -> int:
    res = container.get("resources") or {}
    raw = (res.get("limits") or {}).get(GPU_RESOURCE, (res.get("requests") or {}).get(GPU_RESOURCE))
    try:
        return int(str(raw).strip()) if raw is not None else 0
    except ValueError:
        return -1


def plan(pod: dict, scheduler_name: str) -> tuple[list[dict], str]:
    """(JSON patch ops, why the pod is left alone or '') for an admitted pod. A pod of another
    scheduler, or one requesting no GPU, is left alone with no reason (nothing to say); one of
    dlsched's that cannot be mutated safely is left alone *with* the reason (an admission warning,
    and the service reports its GPUs as not bound)."""
    spec = pod.get("spec") or {}
    if (spec.get("schedulerName") or "default-scheduler") != scheduler_name:
        return [], ""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    if CONFIGMAP_ANNOTATION in annotations:
        return [], ""   # mutated already (a re-invocation)
    if (meta.get("labels") or {}).get(RESERVATION_LABEL) == "gpu" and spec.get("nodeName"):
        return [], ""   # dlsched's own reservation pod: it must request the GPU from the device plugin
    containers = spec.get("containers") or []
    counts = [_gpu_count(c) for c in containers]
    if any(n < 0 for n in counts):
        return [], f"a container's {GPU_RESOURCE} is not a whole number: left to the device plugin"
    if any(_gpu_count(c) for c in spec.get("initContainers") or []):
        return [], f"an init container requests {GPU_RESOURCE}: the pod's GPUs are left to the device plugin"
    total = sum(counts)
    if total == 0:
        return [], ""
    name = CONFIGMAP_PREFIX + secrets.token_hex(8)
    ops: list[dict] = []
    for i, (c, n) in enumerate(zip(containers, counts, strict=True)):
        if not n:
            continue
        res = c.get("resources") or {}
        for kind in ("limits", "requests"):
            if GPU_RESOURCE in (res.get(kind) or {}):
                ops.append({"op": "remove", "path": f"/spec/containers/{i}/resources/{kind}/{_escape(GPU_RESOURCE)}"})
        ref = {"configMapRef": {"name": name, "optional": False}}
        if c.get("envFrom"):
            ops.append({"op": "add", "path": f"/spec/containers/{i}/envFrom/-", "value": ref})
        else:
            ops.append({"op": "add", "path": f"/spec/containers/{i}/envFrom", "value": [ref]})
    values = {GPU_REQUEST_ANNOTATION: str(total), CONFIGMAP_ANNOTATION: name}
    if meta.get("annotations"):
        ops += [{"op": "add", "path": f"/metadata/annotations/{_escape(k)}", "value": v} for k, v in values.items()]
    else:
        ops.append({"op": "add", "path": "/metadata/annotations", "value": values})
    return ops, ""


def review_response(review: dict, scheduler_name: str) -> tuple[dict, str]:
    """The ``admission.k8s.io/v1`` AdmissionReview answering ``review``, and what was done
    ('mutated', 'passed' or 'left: <why>'). Every pod is allowed: the webhook only mutates."""
    request = review.get("request") or {}
    response: dict = {"uid": request.get("uid", ""), "allowed": True}
    outcome = "passed"
    obj = request.get("object") or {}
    if request.get("operation") == "CREATE" and (request.get("kind") or {}).get("kind") == "Pod":
        ops, why = plan(obj, scheduler_name)
        if ops:
            response["patchType"] = "JSONPatch"
            response["patch"] = base64.b64encode(json.dumps(ops).encode()).decode()
            outcome = "mutated"
        elif why:
            response["warnings"] = [f"dlsched: {why}"]
            outcome = f"left: {why}"
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}, outcome
