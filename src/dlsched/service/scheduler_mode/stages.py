"""Where a bind's time goes in the scheduler mode, per stage, for the last binds (issue 34).

A pod's path is: the watch shows it pending (``seen``) -> a pass nominates it (``nominated``:
the binder's queue gets it) -> a bind worker takes it (``picked``) -> its node is checked and its
room reserved (``reserved``) -> the Binding is answered (``answered``; the core's begin/end of
the bind and the HTTP round trip). ``GET /api/v1/state`` shows the median and p95 of each step
over the last :data:`WINDOW` binds, so an operator (and ``benchmarks/bench_scheduler_mode.py``)
sees which step a slow bind waited in. A pod seen pending before a node came (a drain) counts
from that node's arrival, the earliest moment it could be placed.
"""

from __future__ import annotations

import threading
import time
from collections import deque

WINDOW = 500   # binds kept
STEPS = ("seen", "nominated", "picked", "reserved", "answered")


class StageTimes:
    """Wall-clock marks per pod until its bind is answered; the last WINDOW binds' steps."""

    def __init__(self, window: int = WINDOW) -> None:
        self._lock = threading.Lock()
        self._marks: dict[str, list[float]] = {}   # uid -> marks so far, in STEPS order
        self.done: deque[tuple[float, ...]] = deque(maxlen=window)
        self.placeable_since = 0.0   # the last time a node arrived or changed: a pod waits from then at most

    def seen(self, uid: str) -> None:
        with self._lock:
            if len(self._marks) > 100_000:   # pods never bound (gone meanwhile): bounded
                self._marks.clear()
            self._marks[uid] = [time.time()]

    def node_changed(self) -> None:
        self.placeable_since = time.time()

    def mark(self, uid: str, step: int) -> None:
        """Step ``step`` (an index in STEPS) reached now; the last one files the bind."""
        now = time.time()
        with self._lock:
            marks = self._marks.get(uid)
            if marks is None:
                return
            if step == 1:   # nominated: start from when a node could take it (a drain's new node)
                marks[0] = max(marks[0], min(self.placeable_since, now))
            if len(marks) != step:   # a retry of the bind: its marks start again at this step
                del marks[step:]
                if len(marks) < step:
                    return
            marks.append(now)
            if step == len(STEPS) - 1:
                self.done.append(tuple(marks))
                del self._marks[uid]

    def forget(self, uid: str) -> None:
        with self._lock:
            self._marks.pop(uid, None)

    def summary(self) -> dict:
        """Per step (``seen->nominated`` ...): median and p95 in ms over the kept binds."""
        with self._lock:
            rows = list(self.done)
        out: dict = {"binds": len(rows)}
        for i in range(1, len(STEPS)):
            spans = sorted((r[i] - r[i - 1]) * 1000.0 for r in rows)
            name = f"{STEPS[i - 1]}->{STEPS[i]}"
            out[name] = ({"p50_ms": round(spans[len(spans) // 2], 2), "p95_ms": round(spans[int(len(spans) * 0.95)], 2)}
                         if spans else None)
        return out
