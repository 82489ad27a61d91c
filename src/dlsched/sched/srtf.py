"""Shortest remaining time first with the true remaining time (oracle, preemptive).

Every pass ranks pending and running jobs of the VC by remaining time (pending first on
ties, each in queue/start order, as the Helios reference's stable sort does) and hands out
the VC's GPU quota greedily; running jobs that fall outside it are preempted (they pay the
kernel's checkpoint overhead), pending jobs inside it are placed in rank order.
"""

from __future__ import annotations

from operator import attrgetter
from typing import Iterator

from dlsched.kernel.decisions import Decision, Postpone, Preempt, Start, Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.protocols import PolicyBase

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_by_remaining = attrgetter("_remaining", "enq_seq")  # pending jobs: true remaining time, then queue order
_new_start = tuple.__new__


class SrtfPolicy(PolicyBase):
    name = "srtf"
    oracle = True  # the grant: reads true remaining times
    preemptive = True

    def __init__(self, placer, backfill: bool = False) -> None:
        self.placer = placer
        self.placement_name = placer.name

    def new_queue(self) -> ArrivalQueue:
        return ArrivalQueue()

    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        queue = vc.queue
        quota = vc.total_gpus
        if queue.gpus + vc.busy <= quota:
            # everything fits the quota: nobody is preempted, pending jobs go in rank order
            order = sorted(queue, key=_by_remaining)
        else:
            now = view.now
            cands = [(j._remaining, 0, j.enq_seq, j) for j in queue]
            # true remaining of running jobs, inlined (same as view.remaining; this is the hot loop)
            for j in vc.running:
                left = j._remaining - (now - j.run_since) * j.speed
                cands.append((left if left > 0.0 else 0.0, 1, j.run_seq, j))
            cands.sort()  # (remaining, pending-before-running, queue/start order): never compares jobs
            preempt, order = [], []
            for _, is_running, _, job in cands:
                if job.gpus <= quota:
                    quota -= job.gpus
                    if not is_running:
                        order.append(job)
                elif is_running:
                    preempt.append(job)
            for job in preempt:
                yield Preempt(job)
        place = self.placer.place
        for job in order:
            status, placement, reason, _, shared = place(view, vc, job)
            if status is _FITS:
                yield _new_start(Start, (job, placement, shared))  # = Start(job, placement, shared), C-level
            elif status is _POSTPONE:
                yield Postpone(job, reason)
