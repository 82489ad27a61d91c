"""EASY backfilling (Lifka 1995; EASY++ with predictions, Tsafrir et al. 2007): one reservation, for the head.

A pass walks the queue order (``--param order``). Jobs start in order while they fit; the first
that does not is the head and gets a reservation at its shadow time (:mod:`dlsched.sched.shadow`:
the first estimated end of a running job after which it fits). A later job that fits now starts
ahead of it only if it is estimated to end by then or leaves the head room at that time; any
other waits. Nothing else holds a reservation, so a backfilled job may delay every waiting job
but the head. The estimates, their correction and the record of kept and broken reservations are
:mod:`dlsched.sched.reservations`; reservations are recomputed at every pass (a running job that
ends early, or overruns, moves them). ``on_overrun=run`` lets an overrunning backfilled job run
on; ``on_overrun=stop`` stops one that was let in because it would end by the head's reserved
start (not one on GPUs the head does not need) if it still runs ``stop_grace`` s after that start
while the head waits (:mod:`dlsched.sched.overrun_stops`, shared with ``conservative``).
docs/backfill.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.view import ClusterView
from dlsched.sched.reserving import ReservingPolicy
from dlsched.sched.shadow import shadow_of

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE


class EasyPolicy(ReservingPolicy):
    """Backfill behind a single reservation for the head of the queue."""

    name = "easy"

    def schedule(self, view: ClusterView, vc) -> Iterator[Decision]:
        if self.stops.armed:   # a dict test, not a method call: every pass makes it
            yield from self.stops.due(view, vc, self.book, self.placer, self.name)
        order = self.pass_order(view, vc)
        now = view.now
        place = self.placer.place
        book, estimates = self.book, self.estimates
        single = self.placer.single_node_only
        stop = self.on_overrun == "stop"
        shadow = head = None
        for job in order:
            if shadow is None:   # in order: start while jobs fit
                if job.gpus <= vc.free:
                    fit = place(view, vc, job)
                    if fit.status is _FITS:
                        book.started(job, now)
                        yield Start(job, fit.placement, fit.shared)
                        continue
                    if fit.status is _POSTPONE:
                        yield Postpone(job, fit.reason)
                ends = sorted(((estimates.end_of(r, view, now), r) for r in vc.running), key=_first)
                shadow = shadow_of(job, view, vc, ends, single, now)
                if shadow is None:
                    return   # no known time at which the head fits: nothing may overtake it
                book.reserve(job, shadow.time, now)
                head = job
                continue
            if vc.free == 0:
                return
            if job.gpus > vc.free:
                continue
            fit = place(view, vc, job)
            if fit.status is _FITS:
                end = now + estimates.run_time(job, view)
                if shadow.admits(fit.placement, end):
                    book.started(job, now)
                    book.backfilled += 1
                    yield Start(job, fit.placement, fit.shared)
                    if stop and end <= shadow.time:   # let in as ending by the head's start: stopped if not
                        self.stops.arm(view, vc, job, (head,), shadow.time)
            elif fit.status is _POSTPONE:
                yield Postpone(job, fit.reason)



def _first(pair: tuple) -> float:
    return pair[0]
