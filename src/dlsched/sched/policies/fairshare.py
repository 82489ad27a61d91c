"""Fair share over time-decayed usage, per user (Slurm's fair-share factor, KAI's decayed usage).

A user's usage is the GPU-seconds their jobs ran, booked when a job ends, and halved every
``half_life`` seconds after that. A pass walks the queue from the user with the least decayed
usage up, first come first served within a user. Decay multiplies every user's usage by the same
factor, so the order between users changes only when a job ends: the queue is re-sorted then,
not at every pass. Usage is what the scheduler saw (start, end, waits), never a true duration.
Non-preemptive, no backfill by default, any placement; with queues that borrow
(docs/queues.md) it orders the jobs within each queue.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.per_user import PerUserQueue

_RESCALE = 512.0  # half-lives after which the stored (growing) weights are brought back to 1


@dataclass(frozen=True, slots=True)
class FairShareParams:
    """How fast past usage is forgotten."""

    half_life: float = 7 * 86400.0  # seconds (Slurm's PriorityDecayHalfLife default: 7 days)

    def __post_init__(self) -> None:
        if not (self.half_life > 0 and math.isfinite(self.half_life)):
            raise ValueError(f"--param half_life must be a finite number > 0 seconds, got {self.half_life}")


_DEFAULTS = FairShareParams()


class FairSharePolicy(OrderingPolicy):
    """The user with the least time-decayed GPU usage first; FIFO within a user."""

    name = "fairshare"
    Params = FairShareParams

    def __init__(self, placer, backfill: bool = False, half_life: float = _DEFAULTS.half_life) -> None:
        super().__init__(placer, backfill)
        FairShareParams(half_life)
        self.half_life = half_life
        # usage(t) = weight * 2 ** (-(t - t0) / half_life): one shared decay, so only weights are stored
        self.weight: dict[str, float] = defaultdict(float)
        self.t0 = 0.0
        self.version = 0

    def prepare(self, view) -> None:
        self.weight.clear()
        self.t0 = view.now
        self.version += 1

    def usage(self, user: str, now: float) -> float:
        """``user``'s decayed usage at ``now`` (GPU-seconds)."""
        return self.weight[user] * 2.0 ** (-(now - self.t0) / self.half_life)

    def job_finished(self, job: Job, now: float) -> None:
        ran = max(0.0, now - job.submit_time - job.queue_delay)  # every run segment, not the waits
        if not ran or not job.gpus:
            return
        halves = (now - self.t0) / self.half_life
        if halves > _RESCALE:  # keep the weights finite: fold the decay so far into them
            factor = 2.0 ** -halves
            for user in self.weight:
                self.weight[user] *= factor
            self.t0, halves = now, 0.0
        self.weight[job.user or ""] += job.gpus * ran * 2.0 ** halves
        self.version += 1

    def user_rank(self, user: str) -> float:
        """The queue's key for ``user``: its stored weight (the same decay applies to every user)."""
        return self.weight[user]

    def new_queue(self) -> PerUserQueue:
        return PerUserQueue(self)
