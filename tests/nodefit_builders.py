"""Pods and nodes shaped as the v1.20 API server returns them, for the tests of service/nodefit."""

from __future__ import annotations

import copy


def node(name: str, *, cpu: str = "64", memory: str = "512Gi", gpus: str | None = "8", pods: str = "110",
         labels: dict | None = None, taints: list | None = None, unschedulable: bool = False,
         ready: str | None = None, extra: dict | None = None) -> dict:
    alloc = {"cpu": cpu, "memory": memory, "pods": pods, **({"nvidia.com/gpu": gpus} if gpus is not None else {}),
             **(extra or {})}
    n = {"metadata": {"name": name, "uid": f"uid-{name}", "labels": {"kubernetes.io/hostname": name, **(labels or {})}},
         "spec": {}, "status": {"allocatable": alloc, "capacity": copy.deepcopy(alloc)}}
    if taints:
        n["spec"]["taints"] = taints
    if unschedulable:
        n["spec"]["unschedulable"] = True
    if ready is not None:
        n["status"]["conditions"] = [{"type": "MemoryPressure", "status": "False"},
                                     {"type": "Ready", "status": ready, "reason": "KubeletReady"}]
    return n


def pod(name: str, *, requests: dict | None = None, init: list[dict] | None = None, overhead: dict | None = None,
        node_name: str = "", phase: str = "Pending", selector: dict | None = None, affinity: dict | None = None,
        tolerations: list | None = None, ports: list | None = None, containers: int = 1) -> dict:
    """A pod whose ``containers`` containers each request ``requests``."""
    spec: dict = {"schedulerName": "dlsched",
                  "containers": [{"name": f"c{i}", "image": "x",
                                  "resources": {"requests": dict(requests or {}), "limits": {}},
                                  **({"ports": ports} if ports and i == 0 else {})} for i in range(containers)]}
    if init:
        spec["initContainers"] = [{"name": f"init{i}", "image": "x", "resources": {"requests": r}}
                                  for i, r in enumerate(init)]
    if overhead:
        spec["overhead"] = overhead
    if node_name:
        spec["nodeName"] = node_name
    if selector:
        spec["nodeSelector"] = selector
    if affinity:
        spec["affinity"] = affinity
    if tolerations:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "resourceVersion": "42"},
            "spec": spec, "status": {"phase": phase}}


def required(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


def expr(key: str, op: str, *values: str) -> dict:
    e = {"key": key, "operator": op}
    if values:
        e["values"] = list(values)
    return e
