"""The per-pod ConfigMap the webhook's ``envFrom`` names: ``NVIDIA_VISIBLE_DEVICES`` = the GPU
indices dlsched chose on the node (what ``dlsched.io/gpus`` holds), owned by the pod (the
garbage collector deletes it with the pod)."""

from __future__ import annotations

VISIBLE_DEVICES = "NVIDIA_VISIBLE_DEVICES"


def configmap_body(namespace: str, name: str, pod_name: str, pod_uid: str, node: str, gpus: list[int],
                   visible: str | None = None) -> dict:
    """The ConfigMap ``namespace/name`` for pod ``pod_name`` (uid ``pod_uid``) bound to ``node``;
    ``visible``: the device UUIDs read back for ``gpus`` (gpu_binding/identity.py), else the indices."""
    return {
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace,
                     "labels": {"app.kubernetes.io/managed-by": "dlsched", "dlsched.io/gpu-binding": "envvar"},
                     "annotations": {"dlsched.io/node": node, "dlsched.io/pod": pod_name},
                     "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": pod_name, "uid": pod_uid}]},
        "data": {VISIBLE_DEVICES: visible or ",".join(str(g) for g in gpus)},
    }
