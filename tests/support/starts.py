"""A kernel observer for the queue tests: where each start ran."""

from __future__ import annotations


class Starts:
    """Records where each start ran: (job, time, VC whose nodes it got)."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, float, str]] = []

    def attach(self, state) -> None:
        self.state = state

    def started(self, job, vc, now) -> None:
        self.rows.append((job.job_id, now, self.state.hosts.get(job, vc).name))
