"""Per-job history of rate and co-runners (``dlsched experiment ... --history FILE``), so that a
result can be explained: every time a job's rate or the set of jobs sharing its GPUs changes, one
row ``(policy, seed, job, time, rate, co-runners)``; a row with rate 0 marks a stop (finish,
crash or re-queue). A kernel observer: it hears every start and stop and, at the next one (when
the previous transition's rates are final), compares each running job with its last row.
"""

from __future__ import annotations

import csv
from pathlib import Path

from dlsched.core.job import Job, JobState

COLUMNS = ("policy", "seed", "job", "time", "rate", "co_runners", "event")


class RateHistory:
    """Kernel observer recording rate / co-runner changes of every job of one run."""

    def __init__(self, label: str, seed: int) -> None:
        self.label, self.seed = label, seed
        self.state = None
        self.rows: list[tuple] = []
        self._last: dict[Job, tuple[float, tuple[str, ...]]] = {}
        self._t = 0.0
        self._stops: list[tuple[Job, str]] = []

    def attach(self, state) -> None:
        self.state = state

    def started(self, job: Job, vc, now: float) -> None:
        self._flush(now)

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self._flush(now)
        self._stops.append((job, why))

    def _flush(self, now: float) -> None:
        """Record what changed at the previous transition (its rates are set by now)."""
        t = self._t
        for job, why in self._stops:
            if job in self._last:
                del self._last[job]
                self.rows.append((self.label, self.seed, job.job_id, t, 0.0, "", why))
        self._stops.clear()
        state = self.state
        if state is not None:
            for vc in state.vcs:
                for job in vc.running:
                    now_key = (round(job.speed, 6), tuple(sorted(o.job_id for o in state.co_runners(job, "gpu"))))
                    if self._last.get(job) != now_key:
                        event = "start" if job not in self._last else "change"
                        self._last[job] = now_key
                        self.rows.append((self.label, self.seed, job.job_id, t, now_key[0], " ".join(now_key[1]),
                                          event))
        self._t = now

    def finish(self, jobs: list[Job]) -> list[tuple]:
        """The rows, once the run is over (the last transition flushed)."""
        self._flush(self._t)
        for job in jobs:
            if job.state is JobState.FINISHED and job in self._last:
                del self._last[job]
        return self.rows


def write_history(rows: list[tuple], path: Path) -> None:
    """The rows as CSV; errors name the file."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(COLUMNS)
            w.writerows(rows)
    except OSError as exc:
        raise ValueError(f"--history {path}: cannot write: {exc.strerror or exc}") from None
