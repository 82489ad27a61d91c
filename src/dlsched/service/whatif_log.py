"""The live state at a moment of a recorded event log (:mod:`dlsched.service.record`), rebuilt
for a what-if (``dlsched whatif LOG``).

Up to the cut (``at`` seconds after the log's first event; by default the last moment with a
pending pod, :func:`default_cut`, said in a note): every node seen (in the
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

from dlsched.core.cluster import ClusterSpec, NodeSpec, VirtualCluster
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState, StateError
from dlsched.service.log import EventLog, read_log

DURATIONS = ("predicted", "recorded")
RAN = ("finish", "time_limit")     # a pod's end after it ran (time_limit: stopped at its limit)
ENDS = RAN + ("withdraw",)


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
    notes: list[str] = field(default_factory=list)           # what was assumed (the log's, the default cut)


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


def pending_moments(log: EventLog) -> list[float]:
    """The times (log clock) of the events after which some pod was pending: submitted, not
    ended, and not holding GPUs (a ``forget`` or ``oom`` sends a started pod back)."""
    pending: set[str] = set()
    out: list[float] = []
    for e in log.events:
        kind, uid = e["kind"], e.get("uid")
        if kind == "submit":
            pending.add(uid)
        elif kind == "start":
            pending.discard(uid)
        elif kind in ("forget", "oom"):
            pending.add(uid)
        elif kind in ENDS:
            pending.discard(uid)
        elif kind == "config":
            continue
        if pending and (not out or out[-1] != e["at"]):
            out.append(float(e["at"]))
        elif not pending and out and out[-1] == e["at"]:
            out.pop()   # the same instant ended with nothing pending
    return out


def default_cut(log: EventLog) -> tuple[float, str]:
    """The moment a what-if without ``--at`` looks at: the last one with a pending pod, and a
    note saying so (or that there is none and how to choose)."""
    t0, t_end = log.times[0], log.times[-1]
    moments = pending_moments(log)
    if not moments:
        return t_end, (f"{log.where}: no pod was pending at any moment of the log, so the what-if at its last "
                       f"event ({t_end - t0:g} s) has nothing to compare; --at SECONDS picks another moment "
                       f"(0 to {t_end - t0:g})")
    cut = moments[-1]
    return cut, (f"--at not given: the what-if looks at {cut - t0:g} s, the last moment of the log with a pending "
                 f"pod (the log spans 0 to {t_end - t0:g} s; --at SECONDS picks another)")


def state_at(path: str | Path, policy, at: float | None = None, durations: str = "predicted") -> LogMoment:
    """The state ``at`` seconds after the log's first event (None: at its last), queued by
    ``policy``'s queue; ValueError naming what is wrong."""
    if durations not in DURATIONS:
        raise ValueError(f"durations {durations!r}: choose from {', '.join(DURATIONS)}")
    log = read_log(path)
    events, config, timed = log.events, log.config, log.times
    if not timed:
        raise ValueError(f"{log.where}: the log has no events besides its configuration")
    t0, t_end = timed[0], timed[-1]
    notes = list(log.notes)
    if at is not None and not 0 <= at <= t_end - t0:
        raise ValueError(f"--at {at:g}: the log spans 0 to {t_end - t0:g} s after its first event")
    if at is None:
        cut, note = default_cut(log)
        notes.append(note)
    else:
        cut = t0 + at
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
        elif kind in ENDS and uid in started_at:
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
        elif kind in ENDS:
            ended.add(uid)
            start = holding.pop(uid, None)
            if kind in RAN and start is not None:
                runs_before.append(t - float(start["at"]))
    for uid, since in started_at.items():   # still running at the log's end: a lower bound
        recorded.setdefault(uid, t_end - since)
    if not nodes:
        raise ValueError(f"{log.where}: no node was seen by the cut")
    specs = [NodeSpec(name, str(e["vc"]), int(e["gpus"]), log.gpu(e.get("gpu_type"), e.get("gpu_mem_mib")))
             for name, e in nodes.items()]
    by_vc: dict[str, list[str]] = {}
    for spec in specs:
        by_vc.setdefault(spec.vc, []).append(spec.node_id)
    cluster = ClusterSpec(specs, {vc: VirtualCluster(vc, tuple(ids)) for vc, ids in by_vc.items()})
    cap = int(config.get("max_jobs_per_gpu") or 1)
    state = ClusterState(cluster, new_queue=policy.new_queue, max_jobs_per_gpu=cap)
    mean_run = sum(runs_before) / len(runs_before) if runs_before else None
    moment = LogMoment(state, cut, t0, config, mean_run=mean_run, notes=notes)
    quotas = _queues(log.where, queues_toml, state, moment)
    index = {name: i for i, name in enumerate(state.node_ids)}
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
    line_of = {id(e): i for i, e in enumerate(events)}
    for t, _, what, job, e in ops:
        try:
            _apply(state, quotas, index, skipped, t, what, job, e)
        except StateError as exc:   # a log the state cannot follow (edited, from another version)
            raise ValueError(f"{log.place(line_of[id(e)])}: the state at {cut - t0:g} s cannot be rebuilt: "
                             f"{exc}") from None
    for name, e in nodes.items():   # cordoned after the starts: a pod may run on a node cordoned later
        if e.get("cordoned"):
            state.cordon(index[name], cut)
    for name in gone:
        idx = index[name]
        if not state.node_holders[idx]:
            state.remove_node(idx, cut)
    moment.skipped = skipped
    return moment


def _apply(state: ClusterState, quotas, index: dict[str, int], skipped: dict[str, int], t: float, what: str,
           job: Job, e: dict) -> None:
    """One replayed transition: a submission, or a start as the service booked it."""
    if what == "submit":
        state.submit(job, t)
        return
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
