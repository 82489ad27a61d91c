"""Conservative backfill's plan of one VC: free GPUs over time, as a step function.

``times[i]`` starts a step that lasts until ``times[i + 1]`` (the last step lasts for ever) with
``free[i]`` GPUs free. It starts at now with the VC's free GPUs and gains each running job's GPUs
at its estimated end; every reservation takes its GPUs over [start, start + run time). Counts of
GPUs, not nodes: whether a job fits at its reserved time on the nodes is the placement's answer
when that time comes (docs/backfill.md says what this leaves out).
"""

from __future__ import annotations

import math
from bisect import bisect_right


class FreeProfile:
    """Free GPUs of one VC from now on, with the reservations taken out."""

    __slots__ = ("times", "free")

    def __init__(self, now: float, free: int, releases: list[tuple[float, int]]) -> None:
        self.times = [now]
        self.free = [free]
        for end, gpus in sorted(releases):
            if end == math.inf:
                continue   # an end that is not known frees nothing the plan can count on
            if end <= self.times[-1]:
                self.free[-1] += gpus
            else:
                self.times.append(end)
                self.free.append(self.free[-1] + gpus)

    def earliest(self, need: int, run: float, after: float) -> float | None:
        """The first start >= ``after`` with ``need`` GPUs free for ``run`` seconds (None: never)."""
        times, free = self.times, self.free
        i = max(0, bisect_right(times, after) - 1)
        n = len(times)
        while i < n:
            if free[i] < need:
                i += 1
                continue
            start = max(times[i], after)
            end = start + run
            k = i + 1
            while k < n and times[k] < end and free[k] >= need:
                k += 1
            if k == n or times[k] >= end:
                return start
            i = k + 1   # the step k is too small: no start before it can work
        return None

    def _split(self, t: float) -> int:
        """The index of the step that starts at ``t`` (made when ``t`` falls inside a step)."""
        times = self.times
        i = bisect_right(times, t) - 1
        if times[i] == t:
            return i
        times.insert(i + 1, t)
        self.free.insert(i + 1, self.free[i])
        return i + 1

    def take(self, start: float, run: float, gpus: int) -> None:
        """Reserve ``gpus`` over [start, start + run)."""
        lo = self._split(start)
        hi = self._split(start + run) if run != math.inf else len(self.times)
        free = self.free
        for k in range(lo, hi):
            free[k] -= gpus
