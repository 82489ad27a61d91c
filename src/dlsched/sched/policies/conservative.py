"""Conservative backfilling (Mu'alem and Feitelson 2001): a reservation for every waiting job.

A pass plans the VC afresh (:class:`~dlsched.sched.profile.FreeProfile`: free GPUs over time,
from the running jobs' estimated ends): each waiting job in queue order (``--param order``) gets
the earliest start at which its GPUs are free for its estimated run time, given the reservations
of the jobs ahead of it; one whose start is now and that the placement can place now starts,
any other keeps its reservation. So no job starts ahead of another if that could delay it, by
the estimates. Planning counts GPUs, not nodes: a job the placement cannot place now (its GPUs
are free but spread over nodes) is planned from the next estimated end instead. Estimates,
corrections and the reservation record: :mod:`dlsched.sched.reservations`. docs/backfill.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.view import ClusterView
from dlsched.sched.profile import FreeProfile
from dlsched.sched.reserving import ReservingPolicy

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE


class ConservativePolicy(ReservingPolicy):
    """Backfill in which every waiting job holds a reservation (planned in GPU counts)."""

    name = "conservative"

    def schedule(self, view: ClusterView, vc) -> Iterator[Decision]:
        order = self.pass_order(view, vc)
        if not order:
            return
        now = view.now
        place = self.placer.place
        book, estimates = self.book, self.estimates
        plan = FreeProfile(now, vc.free, [(estimates.end_of(r, view, now), r.gpus) for r in vc.running])
        ahead = 0   # waiting jobs before this one that hold a reservation
        for job in order:
            run = estimates.run_time(job, view)
            start = plan.earliest(job.gpus, run, now)
            if start is None:
                continue   # no planned time has room for it (a running job of unknown end holds it)
            if start == now and job.gpus <= vc.free:
                fit = place(view, vc, job)
                if fit.status is _FITS:
                    plan.take(now, run, job.gpus)
                    book.started(job, now)
                    if ahead:
                        book.backfilled += 1
                    yield Start(job, fit.placement, fit.shared)
                    continue
                if fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)
            if start == now:   # free by the count, not placeable now: plan it from the next end
                later = plan.times[1] if len(plan.times) > 1 else None
                start = plan.earliest(job.gpus, run, later) if later is not None else None
                if start is None:
                    continue
            plan.take(start, run, job.gpus)
            book.reserve(job, start, now)
            ahead += 1
