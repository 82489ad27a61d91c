"""Fair share over time-decayed usage, per user (Slurm's fair-share factor, KAI's decayed usage).

A user's usage is the GPU-seconds their jobs have run, each second's worth halved every
``half_life`` seconds after it was used: ``u(t) = sum over running seconds s of gpus x
2^-((t - s) / half_life)``. It counts a job *while it runs*, not only when it ends (a user with a
week-long job holding 64 GPUs is not "idle" until it finishes), and it is integrated exactly (one
:class:`~dlsched.kernel.queue_tree.DecayedUsage` per user, as the queue manager's per-queue usage):
the policy's :class:`UserUsage` is a kernel observer that changes a user's GPU count at each start
and stop (finish, preemption, failure) of their jobs.

A pass walks the queue from the user with the least decayed usage up, first come first served
within a user. Running jobs make usage grow between events, so the order between users may change
at any instant: the queue re-sorts once per instant that has a pass (ranks read at that instant),
not at every pass. Usage is what the scheduler saw (starts and stops), never a true duration.
Non-preemptive, no backfill by default, any placement; with queues that borrow (docs/queues.md)
it orders the jobs within each queue.
"""

from __future__ import annotations

import copy
import math
from dataclasses import dataclass

from dlsched.core.job import Job
from dlsched.kernel.queue_tree import DecayedUsage
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.per_user import PerUserQueue


@dataclass(frozen=True, slots=True)
class FairShareParams:
    """How fast past usage is forgotten."""

    half_life: float = 7 * 86400.0  # seconds (Slurm's PriorityDecayHalfLife default: 7 days)

    def __post_init__(self) -> None:
        if not (self.half_life > 0 and math.isfinite(self.half_life)):
            raise ValueError(f"--param half_life must be a finite number > 0 seconds, got {self.half_life}")


_DEFAULTS = FairShareParams()


class UserUsage:
    """Per-user decayed GPU-seconds, a kernel observer (the driver attaches it to its state with the
    policy's ``observers``): a start adds the job's GPUs to its user's running count, a stop of any
    kind removes them, so a running job's usage accrues continuously and exactly."""

    __slots__ = ("half_life", "users")

    def __init__(self, half_life: float) -> None:
        self.half_life = half_life
        self.users: dict[str, DecayedUsage] = {}

    def _of(self, user: str, now: float) -> DecayedUsage:
        usage = self.users.get(user)
        if usage is None:
            usage = self.users[user] = DecayedUsage(self.half_life, now)
        return usage

    def started(self, job: Job, vc, now: float) -> None:
        self._of(job.user or "", now).change(job.gpus, now)

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self._of(job.user or "", now).change(-job.gpus, now)

    def at(self, user: str, now: float) -> float:
        """``user``'s decayed usage at ``now`` (GPU-seconds; 0 for a user never seen)."""
        usage = self.users.get(user)
        return 0.0 if usage is None else usage.at(now)

    def fork(self, now: float) -> UserUsage:
        """A copy holding each user's usage at ``now`` with nothing running: the start-time
        estimate's forward copy restarts the running jobs' twins at ``now`` (they add their GPUs
        again there), and its usage never reaches the original."""
        twin = UserUsage(self.half_life)
        for user, usage in self.users.items():
            copied = twin.users[user] = DecayedUsage(self.half_life, now)
            copied.value = usage.at(now)
        return twin


class FairSharePolicy(OrderingPolicy):
    """The user with the least time-decayed GPU usage first (running jobs count); FIFO within a user."""

    name = "fairshare"
    Params = FairShareParams

    def __init__(self, placer, backfill: bool = False, half_life: float = _DEFAULTS.half_life) -> None:
        super().__init__(placer, backfill)
        FairShareParams(half_life)
        self.half_life = half_life
        self.tracker = UserUsage(half_life)
        self.observers = (self.tracker,)   # attached to the driver's state (sched/indexes.attach_plugins)
        self.now = 0.0       # the instant the queues' ranks are read at (the last pass's)
        self.version = 0     # bumped per instant with a pass: the queues re-sort then

    def prepare(self, view) -> None:
        self.tracker.users.clear()
        self.now = view.now
        self.version += 1

    def usage(self, user: str, now: float) -> float:
        """``user``'s decayed usage at ``now`` (GPU-seconds), running jobs included."""
        return self.tracker.at(user, now)

    def begin_pass(self, view) -> None:
        """Before a pass over the queue (this policy's, or a reserving policy's that borrows the
        order): usage moved since the last instant's passes, so the queues re-rank."""
        if view.now != self.now:
            self.now = view.now
            self.version += 1

    def schedule(self, view, vc):
        self.begin_pass(view)
        return super().schedule(view, vc)

    def user_rank(self, user: str) -> float:
        """The queue's key for ``user``: its decayed usage at the current instant."""
        return self.tracker.at(user, self.now)

    def fork(self, now: float) -> FairSharePolicy:
        """A copy for the start-time estimate's forward run (:func:`dlsched.sim.twin.fork_policy`)
        with its own usage as of ``now``: the forward run's twins accrue usage as they run, and
        the original's is untouched."""
        clone = copy.copy(self)
        clone.tracker = self.tracker.fork(now)
        clone.observers = (clone.tracker,)
        clone.now = now
        clone.version = self.version + 1
        return clone

    def new_queue(self) -> PerUserQueue:
        return PerUserQueue(self)
