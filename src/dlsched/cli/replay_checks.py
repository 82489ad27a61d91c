"""Checks of an event log before ``dlsched replay`` simulates it: every field the replay reads.

The reader of :mod:`dlsched.service.replay` trusts the service that wrote the log; a log edited
by hand, cut, or from another version can hold a node without a name, a start on a node the log
never named, a finish before its start or a text where a number belongs. Each is one
``ValueError`` naming the log's line here (never a TypeError deep in the simulator), and a torn
last line, which the reader skips, is returned as a note so that nothing is dropped unsaid.
"""

from __future__ import annotations

import math
from pathlib import Path

from dlsched.traces._table import SECONDS_BOUND

_NUMBER = (int, float)


def _is_count(value: object, minimum: int) -> bool:
    return isinstance(value, _NUMBER) and not isinstance(value, bool) and math.isfinite(value) \
        and value == int(value) and value >= minimum


def check_log(path: Path) -> list[str]:
    """Raise ValueError for the first line the replay cannot use; return notes (a torn last line)."""
    from dlsched.service.record import parse_log_lines

    where = f"LOG {path}"
    parsed, torn = parse_log_lines(path, where)
    notes: list[str] = []
    if torn is not None:
        notes.append(f"{where}: line {torn}, the last, is torn (not JSON; the service stopped "
                     "mid-write?): left out of the replay")
    nodes: set[str] = set()
    started: dict[str, float] = {}
    for number, event in parsed:
        if not isinstance(event, dict):
            raise ValueError(f"{where}: line {number} is not an event (a JSON object with 'kind' and 'at')")  # noqa: TRY004 - user input
        at, kind = event.get("at"), event.get("kind")
        if not isinstance(kind, str):
            raise ValueError(f"{where}: line {number}: 'kind' must be a text, got {kind!r}")  # noqa: TRY004
        if isinstance(at, bool) or not isinstance(at, _NUMBER) or not math.isfinite(at) or abs(at) > SECONDS_BOUND:
            raise ValueError(f"{where}: line {number} ({kind}): 'at' must be a time in seconds "
                             f"(a finite number at most {SECONDS_BOUND:.0e}), got {at!r}")
        _check_event(event, kind, float(at), f"{where}: line {number} ({kind})", nodes, started)
    return notes


def _text(event: dict, key: str, where: str) -> str:
    value = event.get(key)
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: '{key}' is missing or empty (want a text), got {value!r}")
    return value


def _check_event(event: dict, kind: str, at: float, where: str, nodes: set[str], started: dict[str, float]) -> None:
    if kind == "node":
        nodes.add(_text(event, "name", where))
        if not isinstance(event.get("vc"), _NUMBER):  # a numeric VC name is read as its text
            _text(event, "vc", where)
        if not _is_count(event.get("gpus"), 1):
            raise ValueError(f"{where}: 'gpus' must be a whole number >= 1, got {event.get('gpus')!r}")
    elif kind == "submit":
        _text(event, "uid", where)
        if event.get("vc") is None:
            raise ValueError(f"{where}: 'vc' is missing")
        if not _is_count(event.get("gpus"), 0):
            raise ValueError(f"{where}: 'gpus' must be a whole number >= 0, got {event.get('gpus')!r}")
        batch = event.get("batch_size")
        if batch not in (None, "") and not _is_count(batch, 0):
            raise ValueError(f"{where}: 'batch_size' must be a whole number >= 0, got {batch!r}")
        for key in ("pred_gpu_util", "pred_gpu_mem_mib"):
            value = event.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, _NUMBER)):
                raise ValueError(f"{where}: '{key}' must be a number or null, got {value!r}")
    elif kind == "start":
        uid = _text(event, "uid", where)
        node = _text(event, "node", where)
        if node not in nodes:
            raise ValueError(f"{where}: starts {uid} on node {node!r}, which no earlier 'node' line names "
                             f"(named: {', '.join(sorted(nodes)) or 'none'})")
        gpus = event.get("gpus")
        if not isinstance(gpus, list) or not all(_is_count(g, 0) for g in gpus):
            raise ValueError(f"{where}: 'gpus' must be a list of GPU indices, got {gpus!r}")
        started[uid] = at
    elif kind in ("finish", "withdraw", "confirm", "forget", "oom"):
        uid = _text(event, "uid", where)
        if kind == "finish" and uid in started and at < started[uid]:
            raise ValueError(f"{where}: {uid} finishes at {at:,.3f}, before its start at {started[uid]:,.3f}")
