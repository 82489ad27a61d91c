"""What a policy may ask for. Policies yield these; the backend (simulator or live service)
applies each one before the policy continues, so the view always reflects earlier decisions."""

from __future__ import annotations

from typing import NamedTuple

from dlsched.core.job import Job

# A placement: for each node used, (global node index, bitmask of the node's GPUs taken).
Placement = tuple[tuple[int, int], ...]


class Start(NamedTuple):
    """Run ``job`` on ``placement``. ``shared`` allows GPUs that already hold other jobs."""

    job: Job
    placement: Placement
    shared: bool = False


class Preempt(NamedTuple):
    """Stop ``job`` (checkpoint), release its GPUs and put it back in its queue."""

    job: Job


Decision = Start | Preempt
