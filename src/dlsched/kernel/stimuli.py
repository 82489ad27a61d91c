"""What drivers tell the kernel (stimuli) and what the kernel asks of them (actions).

A driver turns the world into stimuli — a simulated event, a pod seen by the live service, a line
of a recorded log — and hands them to :meth:`dlsched.kernel.entry.Kernel.handle`, which applies
the transition each one means and, when asked for a pass, runs the policy through the one
dispatcher (:class:`dlsched.kernel.decide.Decider`). What comes back is a list of actions for the
driver to carry out: bind a job to its placement, evict a job, a :class:`Timer` to fire at a time.
"""

from __future__ import annotations

from typing import NamedTuple

from dlsched.core.cluster import GpuType, NodeSpec
from dlsched.core.job import Job
from dlsched.kernel.decisions import Placement
from dlsched.kernel.queue_tree import QueueSpec

TimerKey = tuple
"""A timer's owner: ``(kind, id)``, e.g. ``("vc", 0)`` or ``("limit", "job-17")``."""

VC_TIMER = "vc"        # the first item of a policy's wake-up key: ("vc", vid)
LIMIT_TIMER = "limit"  # the first item of a job's max-runtime key: ("limit", job_id)
TIME_LIMIT_REASON = "time limit"  # the reason of the live kernel's Evict at a job's max runtime


# -- stimuli ------------------------------------------------------------------------------------
class JobSubmitted(NamedTuple):
    """A new job wants GPUs (it queues in its VC)."""

    job: Job


class PassRequested(NamedTuple):
    """Decide now: one policy pass over every VC that changed since the last pass."""


class BindSucceeded(NamedTuple):
    """The backend carried out a :class:`Bind` (live: the pod is bound): the job runs."""

    job: Job


class BindFailed(NamedTuple):
    """A :class:`Bind` could not be carried out: the job gives its GPUs back and waits again."""

    job: Job
    reason: str


class JobFinished(NamedTuple):
    """The job completed and released its GPUs."""

    job: Job


class JobFailed(NamedTuple):
    """The job crashed (e.g. out of memory); it queues again with the attempt counted."""

    job: Job
    reason: str


class JobEvicted(NamedTuple):
    """An :class:`Evict` was carried out (live: the pod is gone after its grace period): the job
    releases its GPUs and queues again with its attained service."""

    job: Job


class JobTimedOut(NamedTuple):
    """The job was stopped at its max runtime (``Job.time_limit_s``) and will not run again
    (live: its pod failed with reason ``DeadlineExceeded``, or dlsched's eviction at the limit
    is carried out); the simulator's kernel stops it at its limit timer instead."""

    job: Job


class JobWithdrawn(NamedTuple):
    """The job left before it finished (live: its pending pod was deleted)."""

    job: Job
    reason: str


class PredictionCorrected(NamedTuple):
    """The job's predictions changed (an observed reading corrected them)."""

    job: Job


class NodeChanged(NamedTuple):
    """A node was added (``spec`` given), removed, cordoned or uncordoned."""

    change: str            # "added" | "removed" | "cordoned" | "uncordoned"
    node: int = -1         # the node's index (not for "added")
    spec: NodeSpec | None = None


class GpuTypeChanged(NamedTuple):
    """A node's GPU type or memory per GPU changed while it stays (a label that arrived or was
    corrected after it joined, busy or not): later placements and sharing checks read the new
    memory; its jobs keep their GPUs."""

    node: int
    gpu_type: GpuType


class PowerChanged(NamedTuple):
    """A node was powered on or off (Cluster Energy Saving)."""

    node: int
    on: bool


class JobAdopted(NamedTuple):
    """A job found running where no decision of this kernel put it (live: a pod bound by someone
    else, or before a restart): its start is booked as it stands, on ``placement``, even on a
    node cordoned since; ``borrowed``: it runs on the node's VC as a loan of its own queue (the
    queue manager books the loan). ``ran_s``: how long it had run before, booked as run time
    already attained, so that its time limit counts from its original start, not from now."""

    job: Job
    placement: Placement
    borrowed: bool = False
    ran_s: float = 0.0   # seconds it had already run when found (live: since its pod's start or bind)


class QueuesChanged(NamedTuple):
    """The queue configuration changed (live: a new ConfigMap version; ``()``: none): queues that
    may borrow get a queue manager built on the state as it stands, others none
    (:meth:`~dlsched.kernel.entry.Kernel.on_queues`)."""

    specs: tuple[QueueSpec, ...]


class TimerFired(NamedTuple):
    """A :class:`Timer` came due. ``key`` says whose: ``("vc", vid)`` gives the VC a pass even with
    nothing new (a policy's wake-up); ``("limit", job_id)`` is the job's max runtime."""

    key: TimerKey


Stimulus = (JobSubmitted | PassRequested | BindSucceeded | BindFailed | JobFinished | JobFailed | JobEvicted
            | JobWithdrawn | PredictionCorrected | NodeChanged | GpuTypeChanged | PowerChanged | TimerFired | JobAdopted
            | QueuesChanged | JobTimedOut)


# -- actions ------------------------------------------------------------------------------------
class Bind(NamedTuple):
    """Run ``job`` on ``placement`` (the kernel holds the GPUs; live: until the bind's outcome)."""

    job: Job
    placement: Placement
    shared: bool = False


class Evict(NamedTuple):
    """Stop ``job`` so that it queues again (live: through the Eviction API, with a grace period
    to checkpoint); the driver reports :class:`JobEvicted` once it is gone (:class:`JobTimedOut`
    for an eviction at the job's time limit, reason :data:`TIME_LIMIT_REASON`). ``for_job``: the job
    the policy makes room for, when it says."""

    job: Job
    reason: str
    for_job: Job | None = None


class Postponed(NamedTuple):
    """The policy could place ``job`` but chose to wait; ``reason`` says why."""

    job: Job
    reason: str


class Timer(NamedTuple):
    """Send :class:`TimerFired` with ``key`` at ``time``. A key is any hashable, a tuple whose first
    item names the kind: ``("vc", vid)`` a policy's wake-up for a VC, ``("limit", job_id)`` a job's
    max runtime; ``("job", id)``, ``("gang", id)``, ``("deadline", id)`` are free for what comes
    next. Each owner has its own timers, so one never stands in for another."""

    time: float
    key: TimerKey


Action = Bind | Evict | Postponed | Timer

NODE_CHANGES = ("added", "removed", "cordoned", "uncordoned")
