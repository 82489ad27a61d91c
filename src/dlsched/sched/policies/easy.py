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
while the head waits: the policy asks for a pass then (``view.wake_at``: the kernel's
``("vc", vid)`` timer) and yields ``Preempt`` (checkpointed and re-queued with its work, so a job
within its own time limit is never killed; live, the eviction path with the pod's grace period).
docs/backfill.md.
"""

from __future__ import annotations

from collections.abc import Iterator

from dlsched.core.job import Job, JobState
from dlsched.kernel.decisions import Decision, Postpone, Preempt, Start, Status
from dlsched.kernel.view import ClusterView
from dlsched.sched.reserving import ReservingPolicy
from dlsched.sched.shadow import shadow_of

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_RUNNING, _PENDING = JobState.RUNNING, JobState.PENDING


class EasyPolicy(ReservingPolicy):
    """Backfill behind a single reservation for the head of the queue."""

    name = "easy"
    stops_overruns = True

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.stops: dict[Job, tuple[float, Job, int]] = {}   # on_overrun=stop: job -> (stop at, head, its run)

    def prepare(self, view: ClusterView) -> None:
        super().prepare(view)
        self.stops.clear()

    def schedule(self, view: ClusterView, vc) -> Iterator[Decision]:
        if self.stops:
            yield from self._stop_overruns(view, vc)
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
                        self._arm(view, vc, job, head, shadow.time)
            elif fit.status is _POSTPONE:
                yield Postpone(job, fit.reason)


    def _arm(self, view: ClusterView, vc, job: Job, head: Job, reserved: float) -> None:
        """Stop ``job`` at ``head``'s reserved start plus the grace, unless it has ended by then."""
        at = reserved + self.stop_grace
        self.stops[job] = (at, head, job.run_seq)
        if at > view.now:   # due now (a reservation for now, no grace): the next pass of the VC checks it
            view.wake_at(at, vc)

    def _stop_overruns(self, view: ClusterView, vc) -> Iterator[Decision]:
        """The backfilled jobs of ``vc`` due to be stopped: still in the run they were let in for,
        the head still waiting and its latest reserved start (plus the grace) due; a head whose
        reservation moved later re-arms the stop there; anything else forgets it."""
        now = view.now
        book, stops = self.book, self.stops
        for job, (at, head, run) in list(stops.items()):
            if job.vc_state is not vc:
                continue
            if job.state is not _RUNNING or job.run_seq != run or head.state is not _PENDING:
                del stops[job]
                continue
            if at > now:
                continue
            reserved = book.reserved(head)
            del stops[job]
            if reserved is None:   # the head holds no reservation any more (another job is ahead)
                continue
            if reserved + self.stop_grace > now:   # its reservation moved: stop there instead
                self._arm(view, vc, job, head, reserved)
                continue
            if head.gpus <= vc.free and self.placer.place(view, vc, head).status is _FITS:
                continue   # the head starts now anyway: the job delays nothing
            book.stopped += 1
            yield Preempt(job, f"overran its estimate into the reservation of {head.job_id} "
                               f"(on_overrun=stop, {self.name})")


def _first(pair: tuple) -> float:
    return pair[0]
