"""Replay a service's event log in the simulator, with the recorded policy or any other.

The log (:mod:`dlsched.service.record`) gives the cluster (every node seen, in the order the
service first saw it: node order breaks placement ties), the arrivals (when the service queued
each pod, its request and predictions) and the run times observed (from the start the bind
confirmed to the pod's end). A job that was withdrawn before it ran, or is still pending when the
log ends, has no run time and is left out; a job still running at the end runs until the log's
last event (its run time is a lower bound). Both are counted in the summary. Times are shifted
so the first event is at 0.

The run itself is built like every other (:mod:`dlsched.run.replay`): a replay writes the same run
directory as ``dlsched simulate`` (so ``dlsched report`` reads it) plus ``decisions.jsonl``: every
start in the simulator's order, with node and GPU indices, the same shape as the log's ``start``
events (written by :class:`StartLog`) so the two can be compared decision for decision.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.cluster import ClusterSpec, NodeSpec, VirtualCluster
from dlsched.core.job import Job
from dlsched.service.log import read_log


@dataclass
class Recorded:
    """What a log holds, ready for the simulator."""

    config: dict
    cluster: ClusterSpec
    jobs: list[Job]
    starts: list[dict]                       # the service's confirmed starts, in order
    left_out: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)   # what the reader assumed (service/log.py)


def load_log(path: str | Path) -> Recorded:
    """Read a log (:func:`dlsched.service.log.read_log`: checked, file and line in every error)
    into a cluster, jobs and the recorded starts. ValueError when it cannot be replayed."""
    log = read_log(path)
    events = log.events
    if not events:
        raise ValueError(f"{log.where}: the log has no events")
    timed = log.times
    if not timed:
        raise ValueError(f"{log.where}: the log has no events besides its configuration")
    t0, t_end = timed[0], timed[-1]
    nodes: dict[str, NodeSpec] = {}
    submits: dict[str, dict] = {}
    runs: dict[str, list] = {}               # uid -> [start event, confirmed?, end time]
    ended: dict[str, str] = {}
    for e in events:
        kind, uid = e["kind"], e.get("uid")
        if kind == "node":   # its memory label (logs written before it: the type's)
            nodes[e["name"]] = NodeSpec(e["name"], str(e["vc"]), int(e["gpus"]),
                                        log.gpu(e.get("gpu_type"), e.get("gpu_mem_mib")))
        elif kind == "submit":
            submits[uid] = e
        elif kind == "start":
            runs[uid] = [e, bool(e.get("adopted")), None]
        elif kind == "confirm" and uid in runs:
            runs[uid][1] = True
        elif kind in ("forget", "oom"):   # the start did not run to the end: a later start counts
            runs.pop(uid, None)
        elif kind in ("finish", "withdraw", "time_limit"):   # time_limit: stopped at its limit, ran until then
            ended[uid] = kind
            if uid in runs:
                runs[uid][2] = e["at"]
    if not nodes:
        raise ValueError(f"{log.where}: the log names no nodes")
    by_vc: dict[str, list[str]] = {}
    for spec in nodes.values():
        by_vc.setdefault(spec.vc, []).append(spec.node_id)
    cluster = ClusterSpec(list(nodes.values()), {vc: VirtualCluster(vc, tuple(ids)) for vc, ids in by_vc.items()})
    jobs, starts, left = [], [], {"withdrawn before running": 0, "pending at the end": 0, "running at the end": 0}
    for uid, sub in submits.items():
        run = runs.get(uid)
        if run is None or not run[1]:
            left["withdrawn before running" if uid in ended else "pending at the end"] += 1
            continue
        start, _, end = run
        if end is None:
            left["running at the end"] += 1
            end = t_end
        job = Job(uid, str(sub["vc"]), int(sub["gpus"]), float(sub["at"]) - t0, max(end - start["at"], 0.0),
                  name=str(sub.get("pod") or uid), model_name=str(sub.get("model") or ""),
                  batch_size=int(sub.get("batch_size") or 0), index=len(jobs))
        for attr in ("pred_gpu_util", "pred_gpu_mem_mib"):
            value = sub.get(attr)
            setattr(job, attr, float(value) if isinstance(value, (int, float)) else math.nan)
        jobs.append(job)
        starts.append({"uid": uid, "at": start["at"] - t0, "node": start["node"], "gpus": list(start["gpus"])})
    starts.sort(key=lambda s: s["at"])
    return Recorded(log.config, cluster, jobs, starts, {k: v for k, v in left.items() if v}, list(log.notes))


class StartLog:
    """A kernel observer writing every start (node name, GPU indices) as the simulator makes it."""

    def __init__(self) -> None:
        self.starts: list[dict] = []
        self._state = None

    def attach(self, state) -> None:
        self._state, self.starts = state, []

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        """Called before a job stops, while its placement is still set: its start is complete."""
        st = self._state
        for node, mask in job.placement or ():
            self.starts.append({"uid": job.job_id, "at": job.run_since, "node": st.node_ids[node],
                                "gpus": [g for g in range(mask.bit_length()) if mask >> g & 1],
                                "seq": job.run_seq})

    def summary(self, metrics) -> dict:
        return {}

    def ordered(self) -> list[dict]:
        return [{k: v for k, v in s.items() if k != "seq"} for s in sorted(self.starts, key=lambda s: s["seq"])]
