"""OrderingPolicy: FIFO, SJF, QSSF... are one policy with different queue keys.

A pass walks the VC's queue in key order and asks the placement pipeline for each job. Without
backfill (the default, as in the Helios reference) it stops at the first job that does not fit,
so a big job at the head is never overtaken; with ``backfill=True`` later jobs may start in the
gaps. A placement that a plug-in postpones (TOPO-AWARE-P) is yielded as a
:class:`~dlsched.kernel.decisions.Postpone`, so the backend counts and logs it.

The policy protocol every backend relies on is :class:`dlsched.sched.protocols.Policy`; this base
derives from :class:`~dlsched.sched.protocols.PolicyBase`, which gives every optional hook its
default.
"""

from __future__ import annotations

from collections.abc import Iterator
from operator import attrgetter

from dlsched.core.job import Job
from dlsched.kernel.correction import observe
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.queues import KeyedQueue
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.protocols import PolicyBase

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_new_start = tuple.__new__


class OrderingPolicy(PolicyBase):
    """Base of the non-preemptive queue-order policies. Subclasses define :meth:`key`."""

    name = "ordering"

    def __init__(self, placer, backfill: bool = False) -> None:
        self.placer = placer
        self.placement_name = placer.name
        self.backfill = backfill

    key_attr: str | None = None  # an order keyed on one job attribute names it (read in C, no call)

    def key(self, job: Job) -> object:
        if self.key_attr is None:
            raise NotImplementedError("an OrderingPolicy defines key() or key_attr")
        return getattr(job, self.key_attr)

    def job_failed(self, job: Job, now: float, reason: str) -> None:
        """Failover (Horus §4.2): a job that crashed for lack of memory is resubmitted with its
        request corrected to the memory its crash report showed -- an observation (prior kept,
        restored by ``Job.reset`` before another run, as ``--observe-after``'s corrections)."""
        seen = job.observed_mem_mib
        if seen == seen and not job.pred_gpu_mem_mib >= seen:
            observe(job, float("nan"), seen, now)

    def new_queue(self) -> KeyedQueue:
        return KeyedQueue(attrgetter(self.key_attr) if self.key_attr is not None else self.key)

    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        queue = vc.queue
        place = self.placer.place
        if queue.pass_order is None and not self.backfill:
            # the hot path: look at the head only. With exclusive GPUs a job needing more GPUs
            # than the VC has free cannot fit, so the placement pipeline is not asked.
            head = queue.head
            while (job := head()) is not None:
                if job.gpus > vc.free and view.max_jobs_per_gpu == 1:
                    return
                status, placement, reason, _, shared = place(view, vc, job)
                if status is not _FITS:
                    if status is _POSTPONE:
                        yield Postpone(job, reason)
                    return
                yield _new_start(Start, (job, placement, shared))  # = Start(job, placement, shared), C-level
            return
        reorder = queue.pass_order
        order = reorder(view.now) if reorder is not None else list(queue)
        exclusive = view.max_jobs_per_gpu == 1
        for job in order:
            if exclusive and job.gpus > vc.free:
                if not self.backfill:
                    return
                if vc.free == 0:
                    return
                continue
            fit = place(view, vc, job)
            if fit.status is _FITS:
                yield Start(job, fit.placement, fit.shared)
                continue
            if fit.status is _POSTPONE:
                yield Postpone(job, fit.reason)
            if not self.backfill:
                return
