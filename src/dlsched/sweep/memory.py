"""Peak resident memory of the current process while a block runs (sampled by a thread).

``ru_maxrss`` is the peak over the whole life of a process, useless in a long-lived Dask worker
that runs many cells; sampling ``/proc/self/statm`` every few milliseconds measures one cell the
same way in a forked local process and in a Dask worker.
"""

from __future__ import annotations

import os
import resource
import threading
from typing import Self

_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def rss_bytes() -> int:
    """Resident memory now (``/proc``), or the process's peak so far where there is no ``/proc``."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class PeakMemory:
    """Context manager: ``.mib`` is the highest resident memory seen while the block ran."""

    def __init__(self, interval_s: float = 0.005) -> None:
        self.interval_s = interval_s
        self._peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self._peak = max(self._peak, rss_bytes())

    def __enter__(self) -> Self:
        self._peak = rss_bytes()
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()
        self._peak = max(self._peak, rss_bytes())

    @property
    def mib(self) -> float:
        return round(self._peak / 2**20, 1)
