"""Reservations live: what ``easy`` and ``conservative`` promised the waiting pods, for the operator.

A reserving policy's :class:`~dlsched.sched.reservations.ReservationBook` keeps, per VC, the
starts its latest pass reserved. Live, a waiting pod that holds one shows it as its ETA (``GET
/api/v1/queue``, the ``dlsched.io/eta`` annotation), in place of the forward simulation's
estimate; a pod whose GPUs are free but that a reservation holds back says for whom: ``reserved
for NS/POD from T``. Other policies hold no reservations: nothing changes for them.
"""

from __future__ import annotations

from datetime import UTC, datetime

from dlsched.core.job import Job, JobState
from dlsched.sched.reservations import ReservationBook

PENDING = JobState.PENDING
LIVE_RECORDS_KEPT = 10_000   # started jobs' reservation records a service keeps as rows (totals stay exact)


def book_of(policy) -> ReservationBook | None:
    """The policy's reservation book, or None for a policy that makes no reservations."""
    book = getattr(policy, "book", None)
    return book if isinstance(book, ReservationBook) and getattr(policy, "reserves", False) else None


def bound_live(policy, keep: int = LIVE_RECORDS_KEPT) -> None:
    """A long-running service keeps the last ``keep`` started jobs' reservation records (the rest
    folded into the totals) and drops those of pods deleted unstarted: memory stays bounded."""
    book = book_of(policy)
    if book is not None:
        book.bound(keep)


def reserved_start(policy, job: Job) -> float | None:
    """The start reserved for a pending ``job`` by the latest pass of its VC (None: none)."""
    book = book_of(policy)
    if book is None or job.state is not PENDING:
        return None
    return book.reserved(job)


def clock_text(t: float) -> str:
    """A service-clock time as ISO 8601 UTC (``2026-11-27T00:10:00Z``)."""
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def holder_ahead(policy, job: Job, rank, known: dict[str, Job]) -> tuple[Job, float] | None:
    """The pending job ahead of ``job`` in the policy's order (``rank``) whose reservation holds
    ``job`` back, and its reserved start: the first such in order (EASY has one, the head). Only
    jobs the service still has (``known``: uid -> job) count. None: no reservation ahead."""
    book = book_of(policy)
    vc = job.vc_state
    if book is None or vc is None:
        return None
    held = book.current.get(vc.vid)
    if not held:
        return None
    mine = rank(job)
    ahead = [(rank(j), j, t) for j, t in held.items()
             if j is not job and j.state is PENDING and known.get(j.job_id) is j and rank(j) < mine]
    if not ahead:
        return None
    _, first, start = min(ahead, key=lambda item: item[0])
    return first, start
