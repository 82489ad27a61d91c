"""Live progress of a sweep: cells done, running, failed, and the time left.

One line per event (a cell finished or failed) and one every ``every_s`` seconds otherwise, so it
reads the same in a terminal and in a CI log. The ETA is the time the cells finished in this run
took per cell, times the cells left.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}h{minutes:02d}m{secs:02d}s" if hours else f"{minutes}m{secs:02d}s" if minutes else f"{secs}s"


class Progress:
    """Counts cells and prints status lines through ``emit``."""

    def __init__(self, total: int, skipped: int, emit: Callable[[str], None], every_s: float = 10.0) -> None:
        self.total, self.skipped, self.emit, self.every_s = total, skipped, emit, every_s
        self.done = self.failed = self.running = 0
        self.t0 = self._last = time.monotonic()

    def eta(self) -> str:
        finished = self.done + self.failed
        left = self.total - self.skipped - finished
        if not finished:
            return "?"
        return duration((time.monotonic() - self.t0) / finished * left)

    def line(self) -> str:
        return (f"sweep: {self.skipped + self.done}/{self.total} done ({self.skipped} earlier), "
                f"{self.running} running, {self.failed} failed, ETA {self.eta()}")

    def started(self) -> None:
        self.running += 1

    def finished(self, label: str, ok: bool, wall_s: float, error: str | None = None) -> None:
        self.running = max(0, self.running - 1)
        if ok:
            self.done += 1
        else:
            self.failed += 1
        what = f"{label} done in {wall_s:.2f} s" if ok else f"{label} FAILED: {error}"
        self.emit(f"{self.line()} | {what}")
        self._last = time.monotonic()

    def tick(self) -> None:
        if time.monotonic() - self._last >= self.every_s:
            self.emit(self.line())
            self._last = time.monotonic()
