"""``on_overrun=stop`` for the reserving policies: a backfilled job that outlives its estimate
into a reservation it was let in ahead of is stopped there (after ``stop_grace`` s).

Why one module for both policies: EASY protects one reservation (the head's), conservative every
reservation of a job ahead of the backfilled one whose GPUs it may hold; the rule is the same.
A job is *armed* when it starts ahead of reservations it could delay, with the jobs holding them
(its *heads*) and the time to stop it (the earliest of their reserved starts plus the grace); the
policy asks for a pass then (``view.wake_at``: the kernel's ``("vc", vid)`` timer). At that pass:

* the job ended, was stopped or restarted since, or no head still waits with a reservation:
  forgotten;
* the heads' reservations moved later (an earlier end elsewhere, a replan): armed again there;
* every head whose reservation is due can start now anyway: forgotten (stopping delays nothing);
* otherwise ``Preempt`` (checkpointed and re-queued with its work, so a job within its own time
  limit is never killed; live, the eviction path with the pod's grace period), counted in the
  book's ``stopped``.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from dlsched.core.job import Job, JobState
from dlsched.kernel.decisions import Preempt, Status
from dlsched.kernel.view import ClusterView

_FITS = Status.FITS
_RUNNING, _PENDING = JobState.RUNNING, JobState.PENDING


class OverrunStops:
    """The armed backfilled jobs of one policy: job -> (stop at, heads, the run it was let in for)."""

    def __init__(self, grace: float) -> None:
        self.grace = grace
        self.armed: dict[Job, tuple[float, tuple[Job, ...], int]] = {}

    def clear(self) -> None:
        self.armed.clear()

    def arm(self, view: ClusterView, vc, job: Job, heads: Sequence[Job], reserved: float) -> None:
        """Stop ``job`` at ``reserved`` (its heads' earliest reserved start) plus the grace, unless
        it has ended by then or no head needs it stopped."""
        at = reserved + self.grace
        self.armed[job] = (at, tuple(heads), job.run_seq)
        if at > view.now:   # due now (a reservation for now, no grace): the next pass of the VC checks it
            view.wake_at(at, vc)

    def due(self, view: ClusterView, vc, book, placer, name: str) -> Iterator[Preempt]:
        """The stops of ``vc``'s armed jobs that are due at this pass (the module doc's rule)."""
        now = view.now
        armed, grace = self.armed, self.grace
        for job, (at, heads, run) in list(armed.items()):
            if job.vc_state is not vc:
                continue
            if job.state is not _RUNNING or job.run_seq != run:
                del armed[job]
                continue
            if at > now:
                continue
            del armed[job]
            waiting = [(r, h) for h in heads if h.state is _PENDING and (r := book.reserved(h)) is not None]
            if not waiting:
                continue   # no head waits with a reservation any more (started, gone, or another is ahead)
            first = min(r for r, _ in waiting)
            if first + grace > now:   # the reservations moved later: stop there instead
                self.arm(view, vc, job, [h for _, h in waiting], first)
                continue
            blocked = next((h for r, h in waiting if r + grace <= now and not _starts_now(view, vc, placer, h)),
                           None)
            if blocked is None:
                continue   # every due head starts now anyway: the job delays nothing
            book.stopped += 1
            yield Preempt(job, f"overran its estimate into the reservation of {blocked.job_id} "
                               f"(on_overrun=stop, {name})")


def _starts_now(view: ClusterView, vc, placer, job: Job) -> bool:
    return job.gpus <= vc.free and placer.place(view, vc, job).status is _FITS
