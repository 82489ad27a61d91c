"""Pods of dlsched's that wait for GPUs, told so on the pod (issue 34, scheduler mode).

A pod that passes the node checks on some node but is not nominated (no room for its GPUs now,
or the policy's order puts others first) would otherwise show nothing in ``kubectl describe
pod``: kube-scheduler writes ``PodScheduled=False`` / ``Unschedulable`` for a pod that waits for
resources, and so does this, with the pod's queue position and estimated start. It is written
once per change, not per pass: when the position changes or the estimate moves by more than the
ETA threshold (``--eta-threshold``, as the ``dlsched.io/eta`` annotation), read on the ETA timer's
ticks. A pod that waited less than one tick is not written to (most such pods are bound before
the write could land, and the write would race their Binding).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dlsched.service.reserved import clock_text


def waiting_message(nodes: int, gpus: int, vc: str, position: int, policy: str, eta: float | None,
                    now: float) -> str:
    """The condition's message: why the pod waits, where it is in its queue, and when it may start."""
    if eta is None or math.isinf(eta):
        when = "no estimated start yet"
    else:
        when = f"estimated start {clock_text(eta)} (in {max(0.0, eta - now):.0f} s)"
    return (f"waiting for GPUs: {nodes} node(s) pass the node checks but none has {gpus} GPU(s) for it now; "
            f"position {position} in the queue of VC {vc} (dlsched, {policy}); {when}")


class GpuWaitReporter:
    """Reports the pods that wait for GPUs (see the module doc). ``rows()`` gives GET
    /api/v1/queue's rows; ``offered(uid)`` the nodes a pod passes (None or empty: no node passes,
    which the Unschedulable report of the node checks says instead); ``write(uid, message)``
    queues the condition and event; ``last_written(uid)`` is the message the pod's condition
    last got from either report (another report in between makes this one write again)."""

    def __init__(self, rows: Callable[[], list[dict]], offered: Callable[[str], frozenset[str] | None],
                 write: Callable[[str, str], bool], last_written: Callable[[str], str], policy: str,
                 threshold: float = 60.0, now: Callable[[], float] | None = None) -> None:
        self.rows, self.offered, self.write, self.last_written = rows, offered, write, last_written
        self.policy = policy
        self.threshold = float(threshold)
        self.now = now
        self.written: dict[str, tuple[int, float, str]] = {}   # uid -> (position, ETA, message) written
        self.seen: set[str] = set()   # pods found waiting at the previous tick
        self.counts = {"queued": 0, "unchanged": 0, "first_tick": 0}   # queued: handed to the writer

    def tick(self) -> int:
        """One round over the queue; the number of reports queued."""
        now = self.now() if self.now is not None else 0.0
        rows = self.rows()
        waiting: set[str] = set()
        queued = 0
        for row in rows:
            uid, rank = row["uid"], row["rank"]
            nodes = self.offered(uid)
            if rank < 0 or not nodes:
                continue   # parked, or no node passes (the node checks' own report)
            waiting.add(uid)
            if uid not in self.seen:
                self.counts["first_tick"] += 1   # waited less than one tick: likely bound before a write lands
                continue
            position, eta = rank + 1, row.get("eta")
            eta_value = math.inf if eta is None else float(eta)
            last = self.written.get(uid)
            if last is not None and last[0] == position and not _moved(last[1], eta_value, self.threshold) \
                    and self.last_written(uid) == last[2]:
                self.counts["unchanged"] += 1
                continue
            message = waiting_message(len(nodes), row["gpus"], row["vc"], position, self.policy, eta, now)
            if self.write(uid, message):
                self.written[uid] = (position, eta_value, message)
                self.counts["queued"] += 1
                queued += 1
        self.seen = waiting
        for uid in [u for u in self.written if u not in waiting]:
            del self.written[uid]
        return queued

    def stats(self) -> dict:
        return {"waiting": len(self.seen), "threshold_s": self.threshold, **self.counts}


def _moved(last: float, t: float, threshold: float) -> bool:
    if math.isinf(last) or math.isinf(t):
        return math.isinf(last) != math.isinf(t)
    return abs(t - last) > threshold
