"""The canonical trace: a list of jobs, the wall-clock origin, and what was skipped and why.

Every loader returns a :class:`Trace`. Nothing is dropped silently: a row that fails
validation raises :class:`TraceError` (naming file, line and column) unless the caller asked
to skip invalid rows, in which case it is counted in ``report.skipped`` by reason. Rows left
out on purpose (time window, VC filter, CPU-only jobs) are counted in ``report.filtered``.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from datetime import datetime
from operator import attrgetter

from dlsched.core.job import Job

# Column order of the canonical CSV/Parquet format (``--trace-format dlsched``).
CANONICAL_COLUMNS: tuple[str, ...] = (
    "job_id", "user", "name", "vc", "gpus", "cpus", "submit_time", "duration", "status",
    "model_name", "batch_size", "onnx_ref", "gpu_util", "gpu_mem_mib",
)
REQUIRED_COLUMNS: tuple[str, ...] = ("job_id", "vc", "gpus", "submit_time", "duration")


class TraceError(ValueError):
    """Invalid trace input. The message names the file, the 1-based line and the column."""

    def __init__(self, path: str, message: str, line: int | None = None, column: str | None = None):
        where = str(path)
        if line is not None:
            where += f", line {line}"
        if column is not None:
            where += f", column {column!r}"
        super().__init__(f"{where}: {message}")
        self.path, self.line, self.column, self.reason = str(path), line, column, message


@dataclass(slots=True)
class LoadReport:
    """What a loader read, skipped (invalid, by reason) and filtered (on purpose, by reason)."""

    source: str = ""
    rows_read: int = 0
    skipped: Counter = field(default_factory=Counter)
    filtered: Counter = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)

    def skip(self, reason: str, example: str) -> None:
        self.skipped[reason] += 1
        self.examples.setdefault(reason, example)

    def as_dict(self) -> dict:
        return {"source": self.source, "rows_read": self.rows_read,
                "skipped": dict(self.skipped), "filtered": dict(self.filtered),
                "examples": dict(self.examples)}

    def lines(self) -> list[str]:
        """Human-readable summary lines for the CLI."""
        out = [f"read {self.rows_read} rows from {self.source}"]
        for reason, n in sorted(self.skipped.items()):
            out.append(f"skipped {n} invalid rows: {reason} (e.g. {self.examples.get(reason, '')})")
        for reason, n in sorted(self.filtered.items()):
            out.append(f"left out {n} rows: {reason}")
        return out


@dataclass(slots=True)
class Trace:
    """Jobs sorted by submit time (stable on input order), with the wall-clock origin.

    ``submit_time`` of each job is in seconds from ``origin`` (``None`` when the input had
    relative times only).
    """

    jobs: list[Job]
    origin: datetime | None = None
    report: LoadReport = field(default_factory=LoadReport)
    name: str = ""

    def __post_init__(self) -> None:
        self.jobs.sort(key=attrgetter("submit_time"))
        # the slot descriptor's __set__ mapped in C: a Python loop costs ~30 ms per 100k jobs
        deque(map(Job.index.__set__, self.jobs, range(len(self.jobs))), maxlen=0)

    def __len__(self) -> int:
        return len(self.jobs)

    @property
    def vcs(self) -> list[str]:
        seen: dict[str, None] = {}
        for job in self.jobs:
            seen.setdefault(job.vc, None)
        return list(seen)

    def reset(self) -> None:
        for job in self.jobs:
            job.reset()
