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

import math
from collections import defaultdict
from dataclasses import dataclass, field

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.per_user import PerUserQueue


@dataclass(frozen=True, slots=True)
class LasParams:
    """The GPU-seconds of attained service per priority level, and how many levels there are."""

    threshold: float = field(default=3600.0 * 8, metadata={"help": "las: GPU-seconds of attained service per "
                                                                   "priority level (8 GPU-hours)."})
    queues: int = field(default=3, metadata={"help": "las: priority levels."})

    def __post_init__(self) -> None:
        if not (self.threshold > 0 and math.isfinite(self.threshold)):
            raise ValueError(f"--param threshold must be a finite number > 0 GPU-seconds, got {self.threshold}")
        if self.queues < 1:
            raise ValueError(f"--param queues must be >= 1, got {self.queues}")


_DEFAULTS = LasParams()


class LasPolicy(OrderingPolicy):
    """Least attained service per user, discretised into priority queues (Tiresias-style)."""

    name = "las"
    Params = LasParams
    ranks_follow_version = True  # a user's level changes only with ``version``: queues keep ranks across pushes

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

    def user_rank(self, user: str) -> float:
        """The queue's key for ``user``: its level."""
        return self.level_of(user)

    def new_queue(self) -> PerUserQueue:
        return PerUserQueue(self)
