"""What a policy may ask for, and the closed set of status codes a placement attempt ends in.

Policies yield decisions; the one dispatcher, :class:`dlsched.kernel.decide.Decider`, carries
out each one as kernel transitions before the policy continues, so the view always reflects
earlier decisions.
"""

from __future__ import annotations

from enum import IntEnum
from typing import NamedTuple

from dlsched.core.job import Job

# A placement: for each node used, (global node index, bitmask of the node's GPUs taken).
Placement = tuple[tuple[int, int], ...]


class Start(NamedTuple):
    """Run ``job`` on ``placement``. ``shared`` allows GPUs that already hold other jobs
    (up to the cluster's ``max_jobs_per_gpu``)."""

    job: Job
    placement: Placement
    shared: bool = False


class Preempt(NamedTuple):
    """Stop ``job`` (checkpoint), release its GPUs and put it back in its queue. ``reason``
    says why (for the decision log) and ``for_job`` whom the GPUs go to (None: nobody in
    particular, e.g. PAB re-queues a slowed job); both optional, so ``Preempt(job)`` still works."""

    job: Job
    reason: str = ""
    for_job: Job | None = None


class Postpone(NamedTuple):
    """``job`` could be placed but the policy chose to wait (e.g. TOPO-AWARE-P's utility floor).
    Nothing changes; the backend counts it and logs ``reason``."""

    job: Job
    reason: str


Decision = Start | Preempt | Postpone


class Status(IntEnum):
    """How a placement attempt ends (after the Kubernetes framework's status codes)."""

    FITS = 0            # a placement was found
    UNSCHEDULABLE = 1   # no node can take the job now (reason says why)
    POSTPONE = 2        # a node could take it, but a plug-in wants to wait


class Fit(NamedTuple):
    """Result of one placement attempt: a status, the placement when it fits, and a reason."""

    status: Status
    placement: Placement | None = None
    reason: str = ""
    score: float = 0.0
    shared: bool = False   # the placement uses GPUs that already hold jobs

    @property
    def fits(self) -> bool:
        return self.status is Status.FITS


NO_ROOM = Fit(Status.UNSCHEDULABLE, None, "not enough free GPUs")

_new_fit = tuple.__new__
_FITS = Status.FITS


def fits(placement: Placement) -> Fit:
    """A FITS result for ``placement``: tuple.__new__ directly, ~2x cheaper than the NamedTuple
    constructor (this runs once per started job in the simulator's hottest path)."""
    return _new_fit(Fit, (_FITS, placement, "", 0.0, False))
