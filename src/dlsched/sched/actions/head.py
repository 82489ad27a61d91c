"""What every queue action asks first: a VC's head job, and whether it fits on given nodes."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.decisions import Status
from dlsched.kernel.state import VcState

FITS = Status.FITS


def head_of(vc: VcState, now: float) -> Job | None:
    """The job the VC's ordering policy looks at first: the queue's head as its last pass left it
    (a queue that re-sorts itself at each pass is not re-sorted here: its pass has side effects,
    e.g. the Helios QSSF queue's count of this instant's arrivals)."""
    return vc.queue.head()
