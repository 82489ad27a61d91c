"""Where the wall time of one command goes (``dlsched simulate --timings``).

The clock starts when :mod:`dlsched.cli` is imported, i.e. as soon as the ``dlsched`` script
runs any of our code; the interpreter's own boot before that (tens of milliseconds) is not
seen from inside and shows up only in an outside wall-clock measurement
(``benchmarks/bench_whole_command.py`` prints it as the remainder).
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

PHASES = ("start_up", "load", "simulate", "write")


class Phases:
    """Consecutive named phases: ``lap(name)`` closes the phase that ran since the last lap."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = {}
        self._last = STARTED

    def lap(self, name: str, minus: float = 0.0) -> float:
        """Record the time since the previous lap as ``name`` (less ``minus`` seconds, which
        the caller attributes to another phase) and return it."""
        now = time.perf_counter()
        spent = now - self._last - minus
        self.seconds[name] = self.seconds.get(name, 0.0) + spent
        self._last = now
        return spent

    def add(self, name: str, seconds: float) -> None:
        self.seconds[name] = self.seconds.get(name, 0.0) + seconds

    def as_dict(self) -> dict[str, float]:
        """Seconds per phase, rounded to the millisecond, plus their ``total``."""
        out = {k: round(v, 3) for k, v in self.seconds.items()}
        out["total"] = round(sum(self.seconds.values()), 3)
        return out

    def line(self) -> str:
        """One line for people: ``start-up 0.41 s, load 0.28 s, ...; total 1.21 s``."""
        parts = ", ".join(f"{k.replace('_', '-')} {v:.2f} s" for k, v in self.seconds.items())
        return f"{parts}; total {sum(self.seconds.values()):.2f} s"
