"""The operator's views of the live adapter: the state (nodes, holders, counters, gangs, VCs)
and the queue (each pending pod's rank, reason and estimated start)."""

from __future__ import annotations

from dlsched.service.adapter import Adapter
from dlsched.service.adoption import gpu_list


def snapshot(ad: Adapter) -> dict:
    """GET /api/v1/state's body (the caller holds the lock)."""
    st, pods = ad.state, ad.book.pods
    nodes = []
    for idx, name in enumerate(st.node_ids):
        if st.node_removed[idx]:
            continue
        nodes.append({"name": name, "vc": st.vcs[st.node_vc[idx]].name, "gpus": st.node_gpus[idx],
                      "cordoned": st.node_cordoned[idx],
                      "holders": {pods[j.job_id].key: gpu_list(m)
                                  for j, m in st.node_holders[idx].items() if j.job_id in pods},
                      "gpu_mem_mib": st.node_mem[idx],
                      "pods": [{"uid": j.job_id, "pod": pods[j.job_id].key, "gpus": gpu_list(m),
                                "state": j.state.name.lower()}
                               for j, m in st.node_holders[idx].items() if j.job_id in pods]})
    return {"policy": ad.policy.name, "nodes": nodes, "running": st.n_running, "pending": st.n_pending,
            "passes": ad.passes, "counters": {**ad.counters, **ad.gangs.counters},
            "gangs": ad.gangs.rows(),   # gang hook
            "vcs": [{"name": vc.name, "gpus": vc.total_gpus, "free": vc.free, "pending": vc.pending}
                    for vc in st.vcs]}


def queue_rows(ad: Adapter, etas: dict) -> list[dict]:
    """GET /api/v1/queue's rows, in each VC's queue order, then the parked pods (lock held). A
    pod's ETA is its reservation under a reserving policy (``eta_source: reservation``), else
    the forward simulation's estimate (``forecast``)."""
    book = ad.book
    now = ad.now()
    out = []
    for vc in ad.state.vcs:
        jobs = sorted(vc.queue, key=ad.rank)
        for rank, job in enumerate(jobs):
            reserved = ad.reasons.reserved(job)   # a reserving policy's promise is the ETA
            out.append({"pod": book.pods[job.job_id].key, "uid": job.job_id, "vc": vc.name, "rank": rank,
                        "gpus": job.gpus, "priority": _num(job.priority),
                        "reason": book.waiting.get(job.job_id) or ad.reasons.held(job),
                        **_eta(etas.get(job.job_id) if reserved is None else reserved, now),
                        "eta_source": "reservation" if reserved is not None else "forecast"})
    for uid, pod in book.parked.items():
        out.append({"pod": pod.key, "uid": uid, "vc": ad.vcs.vc_of(pod), "rank": -1, "gpus": pod.gpus,
                    "priority": None, "reason": book.waiting.get(uid, ""), **_eta(None, now), "eta_source": None})
    return out


def _eta(t: float | None, now: float) -> dict:
    """The queue's ETA fields: the estimated start (service clock) and seconds from now; None where
    there is no estimate (not yet refreshed, a parked pod, or no start in the forward run)."""
    if t is None or t == float("inf"):
        return {"eta": None, "eta_in_s": None}
    return {"eta": t, "eta_in_s": max(0.0, t - now)}


def _num(x: float) -> float | None:
    return None if x != x else x
