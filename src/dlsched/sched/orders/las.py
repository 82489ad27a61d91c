"""Least attained service, Tiresias-style (Gu et al., NSDI'19), discretised into priority queues.

Durations are unknown, so the policy favours whoever has received the least GPU time so far:
a job's level is its user's attained service (GPU-seconds of their finished jobs) divided by
``threshold``, capped at ``queues - 1``; a pass walks the levels from 0 up, first come first
served within a level (Tiresias's discretised LAS, keyed per user because this policy never
preempts a running job). Attained service is what the scheduler saw -- start and finish times
-- never a job's true duration. Non-preemptive, no backfill by default, any placement.

This file is the worked example of "a new policy with an option of its own": the class, its
parameter dataclass, and one line in ``dlsched.registry`` (docs/architecture.md).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy


@dataclass(frozen=True, slots=True)
class LasParams:
    """The GPU-seconds of attained service per priority level, and how many levels there are."""

    threshold: float = 3600.0 * 8  # GPU-seconds: 8 GPU-hours per level
    queues: int = 3

    def __post_init__(self) -> None:
        if not self.threshold > 0:
            raise ValueError(f"--param threshold must be > 0 GPU-seconds, got {self.threshold}")
        if self.queues < 1:
            raise ValueError(f"--param queues must be >= 1, got {self.queues}")


class LasQueue:
    """Pending jobs in (level of their user, submission, queue entry) order. The order changes
    only when a job arrives or a user's service grows, so it is re-sorted only then."""

    __slots__ = ("gpus", "jobs", "policy", "sorted_at")

    def __init__(self, policy: LasPolicy) -> None:
        self.jobs: list[Job] = []
        self.gpus = 0
        self.policy = policy
        self.sorted_at = -1  # the policy's service version the order was sorted at (-1: unsorted)

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
            levels = {user: policy.level_of(user) for user in {j.user or "" for j in self.jobs}}
            self.jobs.sort(key=lambda j: (levels[j.user or ""], j.submit_time, j.enq_seq))
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


_DEFAULTS = LasParams()


class LasPolicy(OrderingPolicy):
    """Least attained service per user, discretised into priority queues (Tiresias-style)."""

    name = "las"
    Params = LasParams

    def __init__(self, placer, backfill: bool = False, threshold: float = _DEFAULTS.threshold,
                 queues: int = _DEFAULTS.queues) -> None:
        super().__init__(placer, backfill)
        LasParams(threshold, queues)  # the same checks when built directly
        self.threshold, self.queues = threshold, queues
        self.attained: dict[str, float] = defaultdict(float)
        self.version = 0  # bumped when a user's level changes: the queues re-sort

    def prepare(self, view) -> None:
        self.attained.clear()  # a policy object may simulate more than once
        self.version += 1

    def level_of(self, user: str) -> int:
        """The priority level of ``user`` (0 = the least attained service)."""
        return min(int(self.attained[user] // self.threshold), self.queues - 1)

    def job_finished(self, job: Job, now: float) -> None:
        user = job.user or ""
        before = self.level_of(user)
        self.attained[user] += job.gpus * max(0.0, now - job.start_time)
        if self.level_of(user) != before:
            self.version += 1

    def new_queue(self) -> LasQueue:
        return LasQueue(self)
