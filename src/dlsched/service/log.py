"""The one reader of the service's event log (:mod:`dlsched.service.record` writes it).

``dlsched replay`` (re-simulation, :mod:`dlsched.service.replay`), ``replay --stimuli``
(:mod:`dlsched.service.feed`) and ``whatif LOG`` (:mod:`dlsched.service.whatif_log`) all read a
log through :func:`read_log`, so each sees the same events and refuses the same damage: a log
edited by hand, cut, merged or from another version fails here with one ``ValueError`` that
names the file, the line, the event's kind and the field (``LOG f.jsonl: line 6 (finish):
...``), never later as a kernel internal. What a reader assumes instead of refusing is a note
on the log (:attr:`EventLog.notes`) that the commands print: a torn last line (a crash
mid-write) left out, a log without its ``config`` line read with the defaults, a second
``config`` line (the service restarted and appended) ending what is read, lines of kinds this
version does not know left out. Times never go back by more than :data:`STEP_BACK_S` (a
stimulus carries the time its pass started, the lines written during the pass a later reading).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field, replace
from pathlib import Path

from dlsched.core.cluster import GpuType, gpu_type
from dlsched.service.pods import GPU_MEMORY_MAX_MIB, GPUS_MAX
from dlsched.traces._table import SECONDS_BOUND

_NUMBER = (int, float)
# the stimuli a service records (kernel/stimuli.py) and the fields each needs besides 'at'
STIMULI = {
    "JobSubmitted": ("uid",), "PassRequested": (), "TimerFired": (), "NodeChanged": ("node",),
    "BindSucceeded": ("uid",), "BindFailed": ("uid",), "JobFinished": ("uid",), "JobFailed": ("uid",),
    "JobEvicted": ("uid",), "JobWithdrawn": ("uid",), "PredictionCorrected": ("uid",),
    "JobAdopted": ("uid", "node"), "QueuesChanged": (), "GpuTypeChanged": ("node",), "JobTimedOut": ("uid",),
}
NODE_CHANGES = ("added", "removed", "cordoned", "uncordoned")
KINDS = frozenset({"config", "node", "node_gone", "submit", "start", "confirm", "forget", "finish", "withdraw",
                   "observe", "adopted", "evict", "evicted", "requeue", "refused", "queues", "oom", "speed",
                   "corrected", "time_limit", "limit_due", "stimulus"})
# A stimulus line carries the time its pass started, so it may trail the lines the pass wrote
# (they carry the service's latest clock reading); more than this is an edited or merged log.
STEP_BACK_S = 1.0
DEFAULTS = {"policy": "fifo", "placement": "", "backfill": False, "max_jobs_per_gpu": 1, "default_gpu": "V100"}


@dataclass
class EventLog:
    """A checked log: its events in order (each with its line number), its configuration and
    what was assumed while reading it."""

    path: Path
    events: list[dict]
    lines: list[int]
    config: dict
    default_gpu: GpuType
    notes: list[str] = field(default_factory=list)

    @property
    def where(self) -> str:
        return f"LOG {self.path}"

    def place(self, i: int) -> str:
        """'LOG f: line N (kind)' for event ``i``: the start of an error about it."""
        e = self.events[i]
        what = e.get("stimulus") if e["kind"] == "stimulus" else e["kind"]
        return f"{self.where}: line {self.lines[i]} ({what})"

    @property
    def times(self) -> list[float]:
        """The times of every event but the configuration (written before the clock is read)."""
        return [float(e["at"]) for e in self.events if e["kind"] != "config"]

    def gpu(self, name: object, mem: object = None) -> GpuType:
        """A node's GPU type by the name the log gives (checked known) with its memory label."""
        return gpu_of(name, mem, self.default_gpu)


def recorded_params(config: dict) -> dict[str, object]:
    """The policy parameters the recording service ran with (its config line's ``params``, written
    by ``serve`` since its policy takes them; an older log has none: the policy's defaults). A
    replay or what-if of the recorded policy starts from these; ``--param`` overrides them. Unset
    optional values (None) are left to the policy's own default."""
    params = config.get("params")
    if not isinstance(params, dict):
        return {}
    return {str(k): v for k, v in params.items() if v is not None}


def gpu_of(name: object, mem: object, fallback: GpuType) -> GpuType:
    """The GPU type called ``name`` (``fallback`` when it has none) with ``mem`` MiB when given."""
    gtype = gpu_type(str(name)) if name else fallback
    if isinstance(mem, _NUMBER) and not isinstance(mem, bool) and mem > 0 and mem != gtype.memory_mib:
        gtype = replace(gtype, memory_mib=int(mem))
    return gtype


def read_log(path: str | Path) -> EventLog:
    """Read and check a log; ValueError naming the file, line, kind and field of the first
    event it cannot use (UnicodeDecodeError / OSError for a file that is no text log)."""
    path = Path(path)
    where = f"LOG {path}"
    raw = path.read_text(encoding="utf-8").splitlines()
    notes: list[str] = []
    events: list[dict] = []
    lines: list[int] = []
    unknown: dict[str, int] = {}
    checker = _Checker(where)
    last_at: tuple[float, int] | None = None
    for number, line in enumerate(raw, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
        except RecursionError:
            raise ValueError(f"{where}: line {number} nests lists or objects too deeply to read "
                             "(an event needs 2 levels)") from None
        except ValueError:
            if number == len(raw):
                notes.append(f"{where}: line {number}, the last, is torn (not JSON; the service stopped "
                             "mid-write?): left out of the replay")
                break
            raise ValueError(f"{where}: line {number} is not JSON") from None
        if not isinstance(event, dict):
            raise ValueError(f"{where}: line {number} is not an event (a JSON object with 'kind' and 'at')")  # noqa: TRY004 - user input
        kind, at = event.get("kind"), event.get("at")
        if not isinstance(kind, str):
            raise ValueError(f"{where}: line {number}: 'kind' must be a text, got {kind!r}")  # noqa: TRY004
        here = f"{where}: line {number} ({event.get('stimulus') if kind == 'stimulus' else kind})"
        if isinstance(at, bool) or not isinstance(at, _NUMBER) or not math.isfinite(at) or abs(at) > SECONDS_BOUND:
            raise ValueError(f"{here}: 'at' must be a time in seconds (a finite number at most "
                             f"{SECONDS_BOUND:.0e}), got {at!r}")
        if kind == "config":
            if events:
                notes.append(f"{where}: line {number} is a second 'config' line (the service restarted and "
                             f"appended to the log?): read up to line {lines[-1]}, the first run only")
                break
        elif kind not in KINDS:
            unknown[kind] = unknown.get(kind, 0) + 1
            continue
        checker.check(event, kind, float(at), here)
        if kind != "config":
            if last_at is not None and at < last_at[0] - STEP_BACK_S:
                raise ValueError(f"{here}: 'at' {at:,.3f} is before line {last_at[1]}'s {last_at[0]:,.3f}; the "
                                 "service's clock never goes back (a log edited or merged by hand?)")
            if last_at is None or at > last_at[0]:
                last_at = (float(at), number)
        events.append(event)
        lines.append(number)
    if unknown:
        notes.append(f"{where}: lines of kinds this version does not read, left out: "
                     + ", ".join(f"{k} ({n})" for k, n in sorted(unknown.items())))
    config = events[0] if events and events[0]["kind"] == "config" else None
    if config is None:
        config = dict(DEFAULTS)
        if events:
            notes.append(f"{where}: no 'config' line (the log's start is missing?): assumed policy fifo with "
                         "its own placement, no backfill, one job per GPU, default GPU V100")
    try:
        default_gpu = gpu_of(config.get("default_gpu") or "V100", None, GpuType())
    except ValueError as exc:
        raise ValueError(f"{where}: line {lines[0]} (config): 'default_gpu': {exc}") from None
    return EventLog(path, events, lines, config, default_gpu, notes)


def _text(event: dict, key: str, where: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: '{key}' is missing or empty (want a text), got {value!r}")
    return value


def _is_count(value: object, minimum: int) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value) \
        and value == int(value) and value >= minimum


def _count(event: dict, key: str, minimum: int, where: str, maximum: int = 10**9) -> None:
    value = event.get(key)
    if not _is_count(value, minimum):
        raise ValueError(f"{where}: '{key}' must be a whole number >= {minimum}, got {value!r}")
    if value > maximum:
        raise ValueError(f"{where}: '{key}' is {value:g}, more than {maximum:,}")


def _gpus(event: dict, minimum: int, where: str) -> None:
    """A GPU count, bounded as the service reads one from a pod or a node (service/pods.py)."""
    _count(event, "gpus", minimum, where, GPUS_MAX)


def _number_or_null(event: dict, keys: tuple[str, ...], where: str) -> None:
    for key in keys:
        value = event.get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, _NUMBER)
                                  or math.isinf(value) or abs(value) > 1e300):
            raise ValueError(f"{where}: '{key}' must be a finite number or null, got {value!r}")


def _gpu_list(event: dict, where: str) -> None:
    gpus = event.get("gpus")
    if not isinstance(gpus, list) or not all(_is_count(g, 0) and g < GPUS_MAX for g in gpus):
        raise ValueError(f"{where}: 'gpus' must be a list of GPU indices, got {gpus!r}")


class _Checker:
    """The per-kind field checks, with what earlier lines established (nodes named, starts)."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.nodes: set[str] = set()
        self.node_gpus: dict[str, int] = {}   # name -> GPUs, from its latest 'node' line
        self.started: dict[str, float] = {}

    def _gpu_type(self, event: dict, where: str) -> None:
        mem = event.get("gpu_mem_mib")   # checked with a type or without one (it was only with one)
        if mem is not None and not (isinstance(mem, _NUMBER) and not isinstance(mem, bool) and math.isfinite(mem)
                                    and 1 <= mem <= GPU_MEMORY_MAX_MIB):
            raise ValueError(f"{where}: 'gpu_mem_mib' must be null or MiB of GPU memory, 1 to {GPU_MEMORY_MAX_MIB:,} "
                             f"(the range the service reads from a node's label), got {mem!r}")
        name = event.get("gpu_type")
        if name in (None, ""):
            return
        try:
            gpu_type(str(name))
        except ValueError as exc:
            raise ValueError(f"{where}: 'gpu_type': {exc} (the service records the type it resolved, so "
                             "the log was edited or written by another version)") from None

    def _on_node(self, node: str, uid: str, event: dict, where: str) -> None:
        """A start (or adoption, refusal) names a node an earlier line named, and GPUs it has."""
        if node not in self.nodes:
            raise ValueError(f"{where}: starts {uid} on node {node!r}, which no earlier 'node' line names "
                             f"(named: {', '.join(sorted(self.nodes)) or 'none'})")
        _gpu_list(event, where)
        n = self.node_gpus.get(node)
        beyond = sorted({g for g in event["gpus"] if n is not None and g >= n})
        if beyond:
            raise ValueError(f"{where}: starts {uid} on GPU(s) {', '.join(map(str, beyond))} of node {node!r}, "
                             f"which has {n} GPUs (indices 0 to {n - 1})")

    def check(self, event: dict, kind: str, at: float, where: str) -> None:
        if kind == "config":
            if event.get("policy") is not None:
                _text(event, "policy", where)
            if event.get("placement") not in (None, "") and not isinstance(event.get("placement"), str):
                raise ValueError(f"{where}: 'placement' must be a text, got {event.get('placement')!r}")
            if event.get("max_jobs_per_gpu") is not None:
                _count(event, "max_jobs_per_gpu", 1, where, 16)   # serve's --max-jobs-per-gpu range
        elif kind == "node":
            name = _text(event, "name", where)
            self.nodes.add(name)
            if not isinstance(event.get("vc"), _NUMBER):  # a numeric VC name is read as its text
                _text(event, "vc", where)
            _gpus(event, 1, where)
            self.node_gpus[name] = int(event["gpus"])
            self._gpu_type(event, where)
        elif kind == "submit":
            _text(event, "uid", where)
            if event.get("vc") is None:
                raise ValueError(f"{where}: 'vc' is missing")
            _gpus(event, 0, where)
            if event.get("batch_size") not in (None, ""):
                _count(event, "batch_size", 0, where)
            _number_or_null(event, ("pred_gpu_util", "pred_gpu_mem_mib"), where)
        elif kind in ("start", "adopted", "refused"):
            uid = _text(event, "uid", where)
            self._on_node(_text(event, "node", where), uid, event, where)
            if kind == "start":
                self.started[uid] = at
        elif kind in ("finish", "withdraw", "confirm", "forget", "oom", "evict", "evicted", "time_limit",
                      "limit_due"):
            uid = _text(event, "uid", where)
            if kind in ("finish", "time_limit") and uid in self.started and at < self.started[uid]:
                raise ValueError(f"{where}: {uid} finishes at {at:,.3f}, before its start at "
                                 f"{self.started[uid]:,.3f}")
        elif kind == "queues":
            if not isinstance(event.get("toml", ""), str):
                raise ValueError(f"{where}: 'toml' must be a text, got {event.get('toml')!r}")
        elif kind == "stimulus":
            self._stimulus(event, where)

    def _stimulus(self, event: dict, where: str) -> None:
        name = event.get("stimulus")
        if not isinstance(name, str) or name not in STIMULI:
            raise ValueError(f"{where}: 'stimulus' {name!r} is not one the service records "
                             f"(known: {', '.join(STIMULI)})")
        for key in STIMULI[name]:
            _text(event, key, where)
        if name == "JobSubmitted":
            if event.get("vc") is None:
                raise ValueError(f"{where}: 'vc' is missing")
            _gpus(event, 0, where)
            if event.get("batch_size") not in (None, ""):
                _count(event, "batch_size", 0, where)
            if event.get("evictions") is not None:
                _count(event, "evictions", 0, where)
            _number_or_null(event, ("submit_time", "attained", "start_time", "queue_delay"), where)
        if name in ("JobSubmitted", "PredictionCorrected"):
            _number_or_null(event, ("pred_gpu_util", "pred_gpu_mem_mib", "pred_duration"), where)
        elif name == "TimerFired" and "limit" in event:   # a job's time limit, keyed by its uid
            _text(event, "limit", where)
        elif name == "TimerFired":   # a VC's wake-up
            _count(event, "vid", 0, where)
        elif name == "QueuesChanged" and not isinstance(event.get("toml", ""), str):
            raise ValueError(f"{where}: 'toml' must be a text, got {event.get('toml')!r}")
        elif name == "GpuTypeChanged":
            self._gpu_type(event, where)
        elif name == "NodeChanged":
            change = event.get("change")
            if change not in NODE_CHANGES:
                raise ValueError(f"{where}: 'change' must be one of {', '.join(NODE_CHANGES)}, got {change!r}")
            if change == "added":
                if not isinstance(event.get("vc"), _NUMBER):
                    _text(event, "vc", where)
                _gpus(event, 1, where)
                self._gpu_type(event, where)
