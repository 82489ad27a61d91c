"""OrderingPolicy: FIFO, SJF, QSSF... are one policy with different queue keys.

A pass walks the VC's queue in key order and starts each job the placer can place. Without
backfill (the default, as in the Helios reference) it stops at the first job that does not
fit, so a big job at the head is never overtaken; with ``backfill=True`` later jobs may start
in the gaps.
"""

from __future__ import annotations

from typing import Iterator

from dlsched.core.job import Job
from dlsched.sim.decisions import Decision, Start
from dlsched.sim.queues import KeyedQueue
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class OrderingPolicy:
    """Base of the non-preemptive queue-order policies. Subclasses define :meth:`key`."""

    name = "ordering"
    oracle = False       # True: may read true durations through the view
    preemptive = False

    def __init__(self, placer, backfill: bool = False) -> None:
        self.placer = placer
        self.placement_name = placer.name
        self.backfill = backfill

    def key(self, job: Job) -> object:
        raise NotImplementedError

    def new_queue(self) -> KeyedQueue:
        return KeyedQueue(self.key)

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterator[Decision]:
        queue = vc.queue
        place = self.placer.place
        if not self.backfill:
            while True:
                job = queue.head()
                if job is None:
                    return
                placement = place(view, vc, job)
                if placement is None:
                    return
                yield Start(job, placement)
        else:
            for job in list(queue):
                if vc.free == 0:
                    return
                if job.gpus <= vc.free:
                    placement = place(view, vc, job)
                    if placement is not None:
                        yield Start(job, placement)
