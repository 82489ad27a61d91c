"""A gang's start-up recovery: "complete, else release" (issue 26).

A crash between a gang's first and last bind leaves some of its pods bound and the rest not. The
nomination recorded every pod's node and GPUs (``gang_members`` in the store), so at start-up,
after the pods were listed, :func:`recover` either binds the rest where they were nominated or,
when that is not possible, deletes the bound ones (their controller recreates them) so that no
GPU is held by half a gang. Kept apart from :mod:`dlsched.service.gangs`, which forms, nominates
and binds gangs while the service runs.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace

from dlsched.core.job import JobState
from dlsched.service.gangs import delete_pod, kube_warner
from dlsched.service.pods import GPUS_ANNOTATION

log = logging.getLogger("dlsched.service")

RUNNING = JobState.RUNNING

def recover(service) -> dict[str, int]:
    """At start-up, after the pods were listed: every gang the store recorded as nominated is
    either completed (its unbound pods bound to their recorded nodes and GPUs) when some of its
    pods are bound, or released (its bound pods deleted) when completing it is not possible.
    Gangs with no pod bound are dropped (their pods are decided again). Also connects the gangs'
    Warning events (:func:`~dlsched.service.gangs.kube_warner`) to the API server, which is
    reachable from here on. Returns counts."""
    core, bridge = service.core, service.bridge
    gangs = core.gangs
    if gangs.warn is None:   # the API server is connected now: gangs that cannot be placed get a Warning event
        with core.lock:
            gangs.connect_warnings(kube_warner(service))
    out = Counter()
    for gang_id, rows in core.store.gang_records().items():
        with core.lock:
            bound = [r for r in rows if (j := core.jobs.get(r["pod_uid"])) is not None and j.state is RUNNING]
            pending = [r for r in rows if r["pod_uid"] in gangs.by_uid]
        if not bound or len(bound) == len(rows):
            core.store.drop_gang(gang_id, core.now(), detail="nothing to recover" if not bound else "complete")
            out["dropped" if not bound else "complete"] += 1
            continue
        ok = len(bound) + len(pending) == len(rows) and bridge is not None
        completed: list[dict] = []
        for r in pending if ok else ():
            with core.lock:
                gang = gangs.by_uid.get(r["pod_uid"])
                pod = gang.members.get(r["pod_uid"]) if gang else None
                idx = core.state.node_index.get(r["node"])
                gpus = [int(g) for g in r["gpus"].split(",") if g]
                mask = sum(1 << g for g in gpus)
                free = idx is not None and not core.state.node_mask[idx] & mask and \
                    all(g < core.state.node_gpus[idx] for g in gpus)
            if pod is None or not free:
                ok = False
                break
            error = bridge.bind(pod.namespace, pod.name, pod.uid, r["node"], gpus, bool(pod.annotations))
            if error:
                log.warning("gang %s: completing pod %s failed: %s", gang_id, pod.key, error)
                ok = False
                break
            completed.append(r)
            with core.lock:   # the pod leaves the forming gang and is adopted where it was bound
                gangs.member_gone(pod.uid, "bound at start-up to complete its gang")
                core.pod_seen(replace(pod, node_name=r["node"],
                                      annotations={**pod.annotations, GPUS_ANNOTATION: r["gpus"]}))
        if ok:
            core.store.drop_gang(gang_id, core.now(), detail=f"completed: {len(completed)} pods bound at start-up")
            out["completed"] += 1
            continue
        for r in bound + completed:
            with core.lock:
                pod = core.pods.get(r["pod_uid"])
            if pod is not None and delete_pod(bridge, pod):
                with core.lock:
                    core.pod_gone(pod.uid)
        core.store.drop_gang(gang_id, core.now(), detail=f"released: {len(bound) + len(completed)} bound pods deleted")
        out["released"] += 1
    return dict(out)
