"""The queue of ``PodScheduled=False`` reports waiting for the writer (scheduler mode, issue 34).

A drain (every node cordoned, then nodes added) makes every pending pod unschedulable at once:
one status PATCH and one event per pod, which took about half of dlsched's CPU in a drain and
raced the Bindings for the API server. So the queue holds at most one report per pod (a newer
report of a pod replaces the one queued, in its place: the writer only ever writes what is true
now), and the writer takes at most ``rate`` reports a second (a token bucket of ``burst``):
kube-scheduler's own default client rate is 50 requests/s, a report is two. A report whose pod
was bound, nominated or given nodes meanwhile is dropped when its turn comes (the writer checks),
so most of a drain's reports are never written, and no report is written late and wrong.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

REPORTS_PER_S = 25.0   # reports (a condition and an event each) the writer sends per second at most
REPORT_BURST = 25      # reports sent at once before the rate applies


class ReportQueue:
    """Reports by pod uid, oldest first (see the module doc); ``put`` from any thread, ``get``
    and ``take_token`` from the one writer thread."""

    def __init__(self, rate: float = REPORTS_PER_S, burst: int = REPORT_BURST,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst < 1:
            raise ValueError(f"rate must be > 0 and burst >= 1, not {rate}, {burst}")
        self.rate, self.burst, self.clock = float(rate), float(burst), clock
        self._lock = threading.Lock()
        self._items: dict[str, tuple[dict, str, bool]] = {}   # uid -> (pod, message, waiting for GPUs)
        self._ready = threading.Event()
        self._tokens, self._at = float(burst), clock()
        self.replaced = 0   # reports that replaced a queued one of the same pod (that one never written)

    def put(self, uid: str, pod: dict, message: str, waiting: bool = False) -> None:
        """Queue the report of ``uid`` (``waiting``: it waits for GPUs, else no node passes)."""
        with self._lock:
            self.replaced += uid in self._items
            self._items[uid] = (pod, message, waiting)
        if not self._ready.is_set():
            self._ready.set()

    def get(self, timeout: float) -> tuple[str, dict, str, bool] | None:
        """The oldest report (uid, pod, message, waiting), or None after ``timeout`` s without one."""
        if not self._ready.wait(timeout):
            return None
        with self._lock:
            if not self._items:
                self._ready.clear()   # under the lock: a put after this sets it again
                return None
            uid = next(iter(self._items))
            return (uid, *self._items.pop(uid))

    def __len__(self) -> int:
        return len(self._items)

    def take_token(self, stop: threading.Event) -> bool:
        """Wait until the rate allows one more report; False when ``stop`` was set meanwhile."""
        while True:
            now = self.clock()
            self._tokens = min(self.burst, self._tokens + (now - self._at) * self.rate)
            self._at = now
            if self._tokens >= 1.0:
                self._tokens -= 1.0
                return True
            if stop.wait((1.0 - self._tokens) / self.rate):
                return False
