"""The live state at a moment of a recorded event log (:mod:`dlsched.service.record`), rebuilt
for a what-if (``dlsched whatif LOG``).

Up to the cut (the log's last event, or ``at`` seconds after its first): every node seen (in the
order the service first saw it, its last facts: VC, GPUs, cordon; removed when gone and empty),
every pod submitted and not ended, pending or holding GPUs since its last ``start`` (assumed or
confirmed; a ``forget`` or ``oom`` sends it back to the queue). The transitions are replayed in
time order on a fresh :class:`~dlsched.kernel.state.ClusterState`, so queue-entry order and each
running job's start are the live ones.

Queues: the last ``queues`` line before the cut (written when the service starts or stops
enforcing queues that borrow) puts the same queue manager on the rebuilt state, and a pod that
was started on another queue's node is booked as that queue's loan, as live. The forward runs of
the what-if then borrow and reclaim as the service would from that moment.

Durations: the log has no duration predictions. ``predicted`` (default) gives every job the mean
run time of the jobs that finished before the cut (what was observable then; one hour when none
had); ``recorded`` gives each job its run time in the whole log (hindsight: how the what-if
would have come out with perfect predictions; a job still pending at the log's end gets the mean).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, VirtualCluster, gpu_type
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.service.record import read_events

DURATIONS = ("predicted", "recorded")


@dataclass
class LogMoment:
    """A rebuilt state and what the caller shows about it."""

    state: ClusterState
    now: float                 # the cut, in the log's clock
    t0: float                  # the log's first event
    config: dict
    names: dict[str, str] = field(default_factory=dict)     # uid -> pod key
    mean_run: float | None = None                           # mean run time finished before the cut
    skipped: dict[str, int] = field(default_factory=dict)
    queues: tuple = ()                                       # the queues the service enforced at the cut


def _gpu(name: object, fallback: GpuType) -> GpuType:
    try:
        return gpu_type(str(name))
    except (ValueError, TypeError):
        return fallback


def _queues(path: str | Path, text: str, state: ClusterState, moment: LogMoment):
    """The queue manager the service ran at the cut (None: none, or queues that do not borrow),
    put on ``state`` before its transitions are replayed so that it books loans and usage."""
    if not text:
        return None
    from dlsched.kernel.quotas import QuotaManager, borrowing_possible
    from dlsched.traces.cluster_queues import parse_queues_text
    from dlsched.traces.model import TraceError

    try:
        specs = parse_queues_text(text, f"{path}: its queues line")
    except TraceError as exc:
        raise ValueError(str(exc)) from None
    moment.queues = specs
    if not borrowing_possible(specs):
        return None
    return QuotaManager(specs, state, strict=False)


def read_log(path: str | Path) -> tuple[list[dict], dict, float, float]:
    """(events, config, first time, last time); ValueError for a log that cannot be used."""
    events = read_events(path)
    config = next((e for e in events if e["kind"] == "config"), {})
    timed = [e["at"] for e in events if e["kind"] != "config"]
    if not timed:
        raise ValueError(f"{path}: the log has no events besides its configuration")
    return events, config, float(timed[0]), float(timed[-1])


def state_at(path: str | Path, policy, at: float | None = None, durations: str = "predicted") -> LogMoment:
    """The state ``at`` seconds after the log's first event (None: at its last), queued by
    ``policy``'s queue; ValueError naming what is wrong."""
    if durations not in DURATIONS:
        raise ValueError(f"durations {durations!r}: choose from {', '.join(DURATIONS)}")
    events, config, t0, t_end = read_log(path)
    if at is not None and not 0 <= at <= t_end - t0:
        raise ValueError(f"--at {at:g}: the log spans 0 to {t_end - t0:g} s after its first event")
    cut = t_end if at is None else t0 + at
    default_gpu = _gpu(config.get("default_gpu", "V100"), GpuType())
    nodes: dict[str, dict] = {}
    gone: set[str] = set()
    submits: dict[str, dict] = {}
    holding: dict[str, dict] = {}          # uid -> its last start event (assumed or confirmed)
    ended: set[str] = set()
    runs_before: list[float] = []           # run times of the jobs that finished before the cut
    started_at: dict[str, float] = {}       # over the whole log, for "recorded" durations
    recorded: dict[str, float] = {}
    queues_toml = ""                        # the queues the service enforced at the cut
    for e in events:
        kind, uid, t = e["kind"], e.get("uid"), float(e["at"])
        if kind == "start":
            started_at[uid] = t
        elif kind in ("finish", "withdraw") and uid in started_at:
            recorded[uid] = t - started_at.pop(uid)
        elif kind in ("forget", "oom"):
            started_at.pop(uid, None)
        if kind == "config" or t > cut:
            continue
        if kind == "node":
            nodes[e["name"]] = e
            gone.discard(e["name"])
        elif kind == "node_gone":
            gone.add(e["name"])
        elif kind == "queues":
            queues_toml = str(e.get("toml") or "")
        elif kind == "submit":
            submits[uid] = e
        elif kind == "start":
            holding[uid] = e
        elif kind in ("forget", "oom"):
            holding.pop(uid, None)
        elif kind in ("finish", "withdraw"):
            ended.add(uid)
            start = holding.pop(uid, None)
            if kind == "finish" and start is not None:
                runs_before.append(t - float(start["at"]))
    for uid, since in started_at.items():   # still running at the log's end: a lower bound
        recorded.setdefault(uid, t_end - since)
    if not nodes:
        raise ValueError(f"{path}: no node was seen by the cut")
    specs = []
    for name, e in nodes.items():
        gtype = _gpu(e.get("gpu_type") or "", default_gpu)
        specs.append(NodeSpec(name, str(e["vc"]), int(e["gpus"]), gtype))
    by_vc: dict[str, list[str]] = {}
    for spec in specs:
        by_vc.setdefault(spec.vc, []).append(spec.node_id)
    cluster = ClusterSpec(specs, {vc: VirtualCluster(vc, tuple(ids)) for vc, ids in by_vc.items()})
    cap = int(config.get("max_jobs_per_gpu") or 1)
    state = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=cap)
    mean_run = sum(runs_before) / len(runs_before) if runs_before else None
    moment = LogMoment(state, cut, t0, config, mean_run=mean_run)
    quotas = _queues(path, queues_toml, state, moment)
    index = {name: i for i, name in enumerate(state.node_ids)}
    for name, e in nodes.items():
        if e.get("cordoned"):
            state.cordon(index[name])
    ops: list[tuple[float, int, str, Job, dict]] = []
    skipped: dict[str, int] = {}
    for n, (uid, sub) in enumerate(submits.items()):
        if uid in ended:
            continue
        if str(sub["vc"]) not in by_vc:
            skipped["VC without nodes"] = skipped.get("VC without nodes", 0) + 1
            continue
        start = holding.get(uid)
        if start is not None and start.get("node") not in index:
            skipped["start on an unknown node"] = skipped.get("start on an unknown node", 0) + 1
            continue
        job = Job(uid, str(sub["vc"]), int(sub["gpus"]), float(sub["at"]), math.nan, name=str(sub.get("pod") or uid))
        for attr in ("pred_gpu_util", "pred_gpu_mem_mib"):
            value = sub.get(attr)
            setattr(job, attr, float(value) if isinstance(value, (int, float)) else math.nan)
        guess = mean_run if mean_run is not None else math.nan
        job.pred_duration = recorded.get(uid, guess) if durations == "recorded" else guess
        moment.names[uid] = job.name
        ops.append((float(sub["at"]), 2 * n, "submit", job, sub))
        if start is not None:
            ops.append((max(float(start["at"]), float(sub["at"])), 2 * n + 1, "start", job, start))
    ops.sort(key=lambda op: (op[0], op[1]))
    state.begin(ops[0][0] if ops else cut)
    for t, _, what, job, e in ops:
        if what == "submit":
            state.submit(job, t)
        else:
            node = index[e["node"]]
            placement = ((node, sum(1 << int(g) for g in e["gpus"])),)
            host = state.vcs[state.node_vc[node]]
            if host is not job.vc_state and quotas is not None:   # a loan, as the service booked it
                state.start_borrowed(job, host, placement, t)
                quotas.adopt(job)
            elif host is not job.vc_state:   # no queues recorded to book it by: left out, counted
                why = "start on another VC's node without queues"
                skipped[why] = skipped.get(why, 0) + 1
                state.withdraw(job, t)
            else:
                state.start(job, placement, t, bool(e.get("shared")))
    for name in gone:
        idx = index[name]
        if not state.node_holders[idx]:
            state.remove_node(idx, cut)
    moment.skipped = skipped
    return moment
