"""The service's event log: everything it saw and decided, one JSON object per line.

``dlsched replay`` reads it back (:mod:`dlsched.service.replay`). The durable store keeps the
decisions a restart needs; this log adds what a replay needs besides: the configuration, each
node's inventory, each job's request and predictions. Lines are appended and flushed one by one,
so a crash loses at most the line being written (the reader, :mod:`dlsched.service.log`,
leaves a torn last line out and says so).

Kinds: ``config`` (policy, placement, backfill, max_jobs_per_gpu), ``node`` (name, vc, gpus,
gpu_type, cordoned), ``node_gone``, ``submit`` (uid, pod, vc, gpus, submit_time, model,
batch_size, pred_gpu_util, pred_gpu_mem_mib), ``start`` (uid, node, gpus), ``confirm``,
``forget``, ``finish``, ``withdraw``, ``observe`` (uid, gpu_util, gpu_mem_mib), ``adopted`` (uid,
node, gpus: a pod bound outside the service, booked as it stands), ``evict`` (uid, pod, for,
why, grace_s: an eviction intent, written before the Eviction API is called), ``evicted`` (uid,
why: the evicted pod is gone), ``requeue`` (uid, pod, replaces, attained, evictions,
submit_time: a controller's new pod took an evicted job over), ``time_limit`` (uid, why: the job
stopped at its time limit), ``limit_due`` (uid, pod, by: a limit the kubelet enforces came due).
Every line has ``at``: the service's clock.

``stimulus`` lines are what the service handed the kernel (:func:`stimulus_fields`), in order
(a change of queues too: ``QueuesChanged`` with the specs as TOML; the ``queues`` line after it
says what was enforced, for ``whatif LOG``):
``dlsched replay --stimuli`` feeds them through the same entry point and compares its Bind actions
with the recorded ``start`` lines. :func:`stimulus_fields` encodes a stimulus and
:func:`stimulus_from_fields` decodes it: the one pair.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import IO

from dlsched.core.cluster import GpuType, NodeSpec
from dlsched.core.job import Job
from dlsched.kernel.stimuli import (
    LIMIT_TIMER,
    VC_TIMER,
    BindFailed,
    BindSucceeded,
    GpuTypeChanged,
    JobAdopted,
    JobEvicted,
    JobFailed,
    JobFinished,
    JobSubmitted,
    JobTimedOut,
    JobWithdrawn,
    NodeChanged,
    PassRequested,
    PredictionCorrected,
    QueuesChanged,
    Stimulus,
    TimerFired,
)


def _clean(value: object) -> object:
    """JSON has no NaN: a missing number is null."""
    if isinstance(value, float) and math.isnan(value):
        return None
    return value


def stimulus_fields(stimulus: object, state) -> dict:
    """One stimulus as a log line's fields: its type, the job's uid, and what a replay needs to
    rebuild it (a new job's request and predictions, a new node's spec, a reason, a VC index;
    nodes by name, since indices are the state's own)."""
    name = type(stimulus).__name__
    out: dict[str, object] = {"stimulus": name}
    job = getattr(stimulus, "job", None)
    if job is not None:
        out["uid"] = job.job_id
        if name == "JobSubmitted":
            out.update(vc=job.vc, gpus=job.gpus, submit_time=job.submit_time, user=job.user, name=job.name,
                       model=job.model_name or job.onnx_ref, batch_size=job.batch_size)
            if job.time_limit_s is not None:   # its max runtime (the pod's limit)
                out["time_limit_s"] = job.time_limit_s
            if job.gpus_per_pod:   # a gang's pod shape: its pieces are placed as its pods
                out["gpus_per_pod"] = job.gpus_per_pod
            if job.preemptions:   # an evicted job's new pod: what it brings along (its run record)
                out.update(attained=job.attained, evictions=job.preemptions, start_time=job.start_time,
                           queue_delay=job.queue_delay)
        if name in ("JobSubmitted", "PredictionCorrected"):
            out.update(pred_gpu_util=job.pred_gpu_util, pred_gpu_mem_mib=job.pred_gpu_mem_mib,
                       pred_duration=job.pred_duration)
    reason = getattr(stimulus, "reason", None)
    if reason is not None:
        out["why"] = reason
    if name == "NodeChanged":
        out["change"] = stimulus.change
        spec = stimulus.spec
        if spec is not None:
            out.update(node=spec.node_id, vc=spec.vc, gpus=spec.gpus, gpu_type=spec.gpu_type.name,
                       gpu_mem_mib=spec.gpu_type.memory_mib)
        else:
            out["node"] = state.node_ids[stimulus.node]
    elif name == "GpuTypeChanged":   # the node by name, its new type and memory per GPU
        out.update(node=state.node_ids[stimulus.node], gpu_type=stimulus.gpu_type.name,
                   gpu_mem_mib=stimulus.gpu_type.memory_mib)
    elif name == "TimerFired" and stimulus.key[0] == LIMIT_TIMER:
        out["limit"] = stimulus.key[1]   # a job's max runtime, keyed ("limit", uid)
    elif name == "TimerFired":
        out["vid"] = stimulus.key[1]   # the live kernel's timers are VC wake-ups, keyed ("vc", vid)
    elif name == "QueuesChanged":   # the specs as the ConfigMap's TOML (empty: no queues)
        from dlsched.traces.cluster_queues import queues_to_toml

        out["toml"] = queues_to_toml(stimulus.specs) if stimulus.specs else ""
    elif name == "JobAdopted":
        (idx, mask), *more = stimulus.placement
        out.update(node=state.node_ids[idx], gpus=_bits(mask), borrowed=stimulus.borrowed)
        if stimulus.ran_s:
            out["ran_s"] = stimulus.ran_s   # run time before it was found (its limit counts it)
        if more:
            out["placement"] = [{"node": state.node_ids[n], "gpus": _bits(m)} for n, m in stimulus.placement]
    return {k: _clean(v) for k, v in out.items()}


def _bits(mask: int) -> list[int]:
    return [g for g in range(mask.bit_length()) if mask >> g & 1]


def _placement(e: dict, state) -> tuple:
    """A recorded JobAdopted's placement ((node index, GPU mask), ...), nodes by name."""
    parts = e.get("placement") or [{"node": e["node"], "gpus": e["gpus"]}]
    out = []
    for part in parts:
        idx = state.node_index.get(str(part["node"]))
        if idx is None:
            raise ValueError(f"a job adopted on node {part['node']!r}, which no earlier NodeChanged added")
        out.append((idx, sum(1 << int(g) for g in part["gpus"])))
    return tuple(out)


def _num(value: object) -> float:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else math.nan


def set_predictions(job: Job, e: dict) -> None:
    """A recorded job's predictions (null: none) on ``job``."""
    job.pred_gpu_util = _num(e.get("pred_gpu_util"))
    job.pred_gpu_mem_mib = _num(e.get("pred_gpu_mem_mib"))
    job.pred_duration = _num(e.get("pred_duration"))


def job_from_fields(e: dict) -> Job:
    """The job of a recorded ``JobSubmitted``, as the service built it: its request, its
    predictions and, for an evicted job's new pod, its run record (the service it attained, its
    evictions, its first start and the time it waited)."""
    model = str(e.get("model") or "")
    job = Job(str(e["uid"]), str(e["vc"]), int(e["gpus"]), float(e.get("submit_time") or 0.0), math.nan,
              user=str(e.get("user") or ""), name=str(e.get("name") or ""),
              model_name="" if model.endswith(".onnx") else model,
              onnx_ref=model if model.endswith(".onnx") else "", batch_size=int(e.get("batch_size") or 0))
    set_predictions(job, e)
    limit = e.get("time_limit_s")
    if isinstance(limit, (int, float)) and not isinstance(limit, bool) and limit > 0:
        job.time_limit_s = float(limit)
    per = e.get("gpus_per_pod")
    if isinstance(per, int) and not isinstance(per, bool) and per > 0:
        job.gpus_per_pod = per   # ValueError when the GPUs are not whole pods: the reader names the line
    if e.get("evictions"):   # its run record, which policies rank by (LAS, srtf-pred's attained time)
        job.attained, job.preemptions = float(e.get("attained") or 0.0), int(e["evictions"])
        if isinstance(e.get("start_time"), (int, float)):
            job.start_time = float(e["start_time"])
        if isinstance(e.get("queue_delay"), (int, float)):
            job.queue_delay = float(e["queue_delay"])
    return job


def stimulus_from_fields(e: dict, jobs: dict[str, Job], state, gpu: Callable[[object, object], GpuType]) -> Stimulus:
    """The stimulus a ``stimulus`` line records (the inverse of :func:`stimulus_fields`), on
    ``state``; ``jobs`` maps uids to the jobs rebuilt so far (a new one is added), ``gpu`` turns
    a recorded type name and memory into a GPU type. ValueError for a job or node the log never
    introduced."""
    kind = e["stimulus"]
    if kind == "JobSubmitted":
        job = jobs[str(e["uid"])] = job_from_fields(e)
        return JobSubmitted(job)
    if kind == "PassRequested":
        return PassRequested()
    if kind == "TimerFired" and "limit" in e:
        return TimerFired((LIMIT_TIMER, str(e["limit"])))
    if kind == "TimerFired":
        return TimerFired((VC_TIMER, int(e["vid"])))
    if kind == "QueuesChanged":   # TraceError (the TOML's line and key) for queues edited by hand
        from dlsched.traces.cluster_queues import parse_queues_text

        text = str(e.get("toml") or "")
        return QueuesChanged(parse_queues_text(text, "its queues") if text else ())
    if kind == "NodeChanged":
        if e["change"] == "added":
            return NodeChanged("added", spec=NodeSpec(str(e["node"]), str(e["vc"]), int(e["gpus"]),
                                                      gpu(e.get("gpu_type"), e.get("gpu_mem_mib"))))
        node = state.node_index.get(str(e["node"]))
        if node is None:
            raise ValueError(f"node {e['node']!r} is {e['change']} but no earlier NodeChanged added it")
        return NodeChanged(str(e["change"]), node)
    if kind == "GpuTypeChanged":
        node = state.node_index.get(str(e["node"]))
        if node is None:
            raise ValueError(f"node {e['node']!r} changed its GPU type but no earlier NodeChanged added it")
        return GpuTypeChanged(node, gpu(e.get("gpu_type"), e.get("gpu_mem_mib")))
    job = jobs.get(str(e.get("uid")))
    if job is None:
        raise ValueError(f"a {kind} for job {e.get('uid')!r}, which no earlier JobSubmitted submitted")
    if kind == "PredictionCorrected":
        set_predictions(job, e)
        return PredictionCorrected(job)
    if kind == "JobAdopted":
        return JobAdopted(job, _placement(e, state), bool(e.get("borrowed")), float(e.get("ran_s") or 0.0))
    if kind in _WITH_REASON:
        return _WITH_REASON[kind](job, str(e.get("why") or ""))
    return _JOB_ONLY[kind](job)


_WITH_REASON = {"BindFailed": BindFailed, "JobFailed": JobFailed, "JobWithdrawn": JobWithdrawn}
_JOB_ONLY = {"BindSucceeded": BindSucceeded, "JobFinished": JobFinished, "JobEvicted": JobEvicted,
             "JobTimedOut": JobTimedOut}


class Recorder:
    """Appends events to a JSONL file (one writer: the service holds its core's lock)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._file: IO[str] = open(self.path, "a", encoding="utf-8")  # noqa: SIM115 - lives with the service
        self._lock = threading.Lock()

    def write(self, kind: str, at: float, **fields: object) -> None:
        line = json.dumps({"kind": kind, "at": at, **{k: _clean(v) for k, v in fields.items()}},
                          separators=(",", ":"))
        with self._lock:
            if self._file.closed:
                return   # the service is stopping: a late watch event is not recorded
            self._file.write(line + "\n")
            self._file.flush()

    def close(self) -> None:
        with self._lock:
            self._file.close()


def read_events(path: str | Path) -> list[dict]:
    """The checked events of a log, in order: :func:`dlsched.service.log.read_log`, the one reader."""
    from dlsched.service.log import read_log

    return read_log(path).events
