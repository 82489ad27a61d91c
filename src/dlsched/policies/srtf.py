"""Shortest remaining time first with the true remaining time (oracle, preemptive).

Every pass ranks pending and running jobs of the VC by remaining time (pending first on
ties, each in queue/start order, as the Helios reference's stable sort does) and hands out
the VC's GPU quota greedily; running jobs that fall outside it are preempted (they pay the
engine's checkpoint overhead), pending jobs inside it are placed in rank order.
"""

from __future__ import annotations

from typing import Iterator

from dlsched.sim.decisions import Decision, Preempt, Start
from dlsched.sim.queues import ArrivalQueue
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class SrtfPolicy:
    name = "srtf"
    oracle = True
    preemptive = True

    def __init__(self, placer, backfill: bool = False) -> None:
        self.placer = placer
        self.placement_name = placer.name

    def new_queue(self) -> ArrivalQueue:
        return ArrivalQueue()

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterator[Decision]:
        queue = vc.queue
        place = self.placer.place
        quota = vc.total_gpus
        if queue.gpus + vc.busy <= quota:
            # everything fits the quota: nobody is preempted, pending jobs go in rank order
            ranked = sorted(queue, key=lambda j: (j.remaining, j.enq_seq))
            for job in ranked:
                placement = place(view, vc, job)
                if placement is not None:
                    yield Start(job, placement)
            return
        now = view.now
        cands = [(j.remaining, 0, j.enq_seq, j) for j in queue]
        # true remaining of running jobs, inlined (same as view.remaining; this is the hot loop)
        for j in vc.running:
            left = j.remaining - (now - j.run_since) * j.speed
            cands.append((left if left > 0.0 else 0.0, 1, j.run_seq, j))
        cands.sort()  # (remaining, pending-before-running, queue/start order): never compares jobs
        preempt, prerun = [], []
        for _, is_running, _, job in cands:
            if job.gpus <= quota:
                quota -= job.gpus
                if not is_running:
                    prerun.append(job)
            elif is_running:
                preempt.append(job)
        for job in preempt:
            yield Preempt(job)
        for job in prerun:
            placement = place(view, vc, job)
            if placement is not None:
                yield Start(job, placement)
