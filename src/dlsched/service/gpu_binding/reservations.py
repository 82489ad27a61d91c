"""Reservation pods: one per GPU dlsched's mutated pods use on a node, requesting
``nvidia.com/gpu: 1`` and created with ``spec.nodeName`` (bound by dlsched, no scheduler
involved), so that the device plugin and every other scheduler count that GPU as taken. Created
before the Binding of the first pod on the GPU, deleted once no pod of dlsched's holds it.

Which physical device the kubelet gives a reservation pod is the device plugin's choice; the
ConfigMap names dlsched's index. Both are the same GPU where only dlsched's pods use the node's
GPUs (a dedicated node) or where the plugin's picks follow the index order; docs/service.md
says which set-ups those are.
"""

from __future__ import annotations

import hashlib
import re

from dlsched.service.gpu_binding.mutation import GPU_RESOURCE, RESERVATION_LABEL

RESERVATION_PREFIX = "dlsched-hold-"
NODE_ANNOTATION, GPU_ANNOTATION = "dlsched.io/node", "dlsched.io/gpu"
PAUSE_IMAGE = "registry.k8s.io/pause:3.9"


def reservation_name(node: str, gpu: int) -> str:
    """``dlsched-hold-<node>-<gpu>``, kept a DNS label: a long or odd node name is cut and hashed."""
    base = re.sub(r"[^a-z0-9-]", "-", node.lower()).strip("-")
    tail = f"-{gpu}"
    room = 63 - len(RESERVATION_PREFIX) - len(tail)
    if len(base) > room or base != node:
        digest = hashlib.sha1(node.encode()).hexdigest()[:8]
        base = f"{base[:room - 9]}-{digest}".strip("-")
    return f"{RESERVATION_PREFIX}{base}{tail}"


def is_reservation(pod_name: str, labels: dict) -> bool:
    """A reservation pod of dlsched's (the service counts no GPU for it: its pod holds it)."""
    return labels.get(RESERVATION_LABEL) == "gpu" and pod_name.startswith(RESERVATION_PREFIX)


def reservation_pod(namespace: str, node: str, gpu: int, scheduler_name: str, image: str = PAUSE_IMAGE) -> dict:
    """The reservation pod of GPU ``gpu`` on ``node``."""
    one = {GPU_RESOURCE: "1"}
    return {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": reservation_name(node, gpu), "namespace": namespace,
                     "labels": {RESERVATION_LABEL: "gpu", "app.kubernetes.io/managed-by": "dlsched"},
                     "annotations": {NODE_ANNOTATION: node, GPU_ANNOTATION: str(gpu)}},
        "spec": {"nodeName": node, "schedulerName": scheduler_name, "restartPolicy": "Always",
                 "terminationGracePeriodSeconds": 0, "automountServiceAccountToken": False,
                 "tolerations": [{"operator": "Exists"}],
                 "containers": [{"name": "hold", "image": image,
                                 "resources": {"limits": one, "requests": one}}]},
    }
