"""A pending-job queue ordered by a per-user rank that the policy keeps (LAS's level, fair share's
decayed usage), then by submission and queue entry.

A user's rank changes only when the policy says so (its ``version`` grows: LAS when a job ends,
fair share at each instant with a pass, since running jobs' usage grows), so the queue is
re-sorted then and at arrivals, not at every pass.
"""

from __future__ import annotations

from typing import Protocol

from dlsched.core.job import Job


class RanksUsers(Protocol):
    """What the queue needs from its policy."""

    version: int

    def user_rank(self, user: str) -> float: ...


class PerUserQueue:
    """Pending jobs in (their user's rank, submission, queue entry) order."""

    __slots__ = ("gpus", "jobs", "policy", "sorted_at")

    def __init__(self, policy: RanksUsers) -> None:
        self.jobs: list[Job] = []
        self.gpus = 0
        self.policy = policy
        self.sorted_at = -1  # the policy's version the order was sorted at (-1: unsorted)

    def push(self, job: Job) -> None:
        self.jobs.append(job)
        self.gpus += job.gpus
        self.sorted_at = -1

    def remove(self, job: Job) -> None:
        self.jobs.remove(job)
        self.gpus -= job.gpus

    def _sorted(self) -> list[Job]:
        policy = self.policy
        if self.sorted_at != policy.version:
            ranks = {user: policy.user_rank(user) for user in {j.user or "" for j in self.jobs}}
            self.jobs.sort(key=lambda j: (ranks[j.user or ""], j.submit_time, j.enq_seq))
            self.sorted_at = policy.version
        return self.jobs

    def head(self) -> Job | None:
        jobs = self._sorted()
        return jobs[0] if jobs else None

    def pass_order(self, now: float) -> list[Job]:
        return list(self._sorted())

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self):
        return iter(list(self.jobs))
