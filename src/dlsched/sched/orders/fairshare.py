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

_RESCALE = 512.0  # half-lives after which the stored (growing) weights are brought back to 1


@dataclass(frozen=True, slots=True)
class FairShareParams:
    """How fast past usage is forgotten."""

    half_life: float = 7 * 86400.0  # seconds (Slurm's PriorityDecayHalfLife default: 7 days)

    def __post_init__(self) -> None:
        if not (self.half_life > 0 and math.isfinite(self.half_life)):
            raise ValueError(f"--param half_life must be a finite number > 0 seconds, got {self.half_life}")


class FairShareQueue:
    """Pending jobs in (their user's decayed usage, submission, queue entry) order; re-sorted only
    when some user's usage changed since the last sort."""

    __slots__ = ("gpus", "jobs", "policy", "sorted_at")

    def __init__(self, policy: FairSharePolicy) -> None:
        self.jobs: list[Job] = []
        self.gpus = 0
        self.policy = policy
        self.sorted_at = -1

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
            weight = policy.weight
            self.jobs.sort(key=lambda j: (weight[j.user or ""], j.submit_time, j.enq_seq))
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

    def new_queue(self) -> FairShareQueue:
        return FairShareQueue(self)
