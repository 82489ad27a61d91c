"""The service's event log: everything it saw and decided, one JSON object per line.

``dlsched replay`` reads it back (:mod:`dlsched.service.replay`). The durable store keeps the
decisions a restart needs; this log adds what a replay needs besides: the configuration, each
node's inventory, each job's request and predictions. Lines are appended and flushed one by one,
so a crash loses at most the line being written (the reader skips a torn last line).

Kinds: ``config`` (policy, placement, backfill, max_jobs_per_gpu), ``node`` (name, vc, gpus,
gpu_type, cordoned), ``node_gone``, ``submit`` (uid, pod, vc, gpus, submit_time, model,
batch_size, pred_gpu_util, pred_gpu_mem_mib), ``start`` (uid, node, gpus), ``confirm``,
``forget``, ``finish``, ``withdraw``, ``observe`` (uid, gpu_util, gpu_mem_mib), ``adopted`` (uid,
node, gpus: a pod bound outside the service, booked as it stands), ``evict`` (uid, pod, for,
why, grace_s: an eviction intent, written before the Eviction API is called), ``evicted`` (uid,
why: the evicted pod is gone), ``requeue`` (uid, pod, replaces, attained, evictions,
submit_time: a controller's new pod took an evicted job over).
Every line has ``at``: the service's clock.

``stimulus`` lines are what the service handed the kernel (:func:`stimulus_fields`), in order:
``dlsched replay --stimuli`` feeds them through the same entry point and compares its Bind actions
with the recorded ``start`` lines.
"""

from __future__ import annotations

import json
import math
import threading
from pathlib import Path
from typing import IO


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
            if job.preemptions:   # an evicted job's new pod: what it brings along
                out.update(attained=job.attained, evictions=job.preemptions)
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
    elif name == "TimerFired":
        out["vid"] = stimulus.vid
    return {k: _clean(v) for k, v in out.items()}


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


def parse_log_lines(path: str | Path, where: str) -> tuple[list[tuple[int, object]], int | None]:
    """Every non-blank line of a log as (line number, parsed JSON), and the number of a torn last
    line (a crash mid-write: not JSON, left out) or None. Any other line that is not JSON raises
    ValueError naming ``where`` and its line number. Checks of the events themselves are the
    caller's (:func:`read_events`; the CLI's stricter ``replay_checks``)."""
    lines = Path(path).read_text(encoding="utf-8").splitlines()
    parsed: list[tuple[int, object]] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            parsed.append((number, json.loads(line)))
        except ValueError:
            if number == len(lines):
                return parsed, number
            raise ValueError(f"{where}: line {number} is not JSON") from None
    return parsed, None


def read_events(path: str | Path) -> list[dict]:
    """The events of a log, in order. A torn last line (a crash mid-write) is skipped; any other
    bad line raises ValueError naming its line number."""
    events = []
    for number, event in parse_log_lines(path, str(path))[0]:
        if not isinstance(event, dict) or not isinstance(event.get("kind"), str) \
                or not isinstance(event.get("at"), (int, float)):
            raise ValueError(f"{path}: line {number} is not an event (needs 'kind' and a numeric 'at')")
        events.append(event)
    return events
