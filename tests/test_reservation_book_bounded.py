"""Issue 35 pt 5: a long-running service's ``ReservationBook`` is bounded. Started jobs' records
are folded into the totals and only the last ``keep`` stay as rows; a record of a pod deleted
before it started is dropped at the next pass of its VC. ``summary()`` counts what was folded
away, so its numbers are the unbounded book's. The simulator keeps every record (its
``reservations.csv``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from dlsched.registry import make_policy
from dlsched.sched.reservations import ReservationBook
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.reserved import LIVE_RECORDS_KEPT
from dlsched.service.store import Store

VC = SimpleNamespace(vid=0)


class FakeJob:
    """What the book reads of a job: hashable by identity, its VC's ``vid``."""

    def __init__(self, i: int) -> None:
        self.job_id, self.index, self.vc_state = f"j{i}", i, VC


def job(i: int) -> FakeJob:
    return FakeJob(i)


def play(book: ReservationBook, n: int) -> list:
    """``n`` jobs: job i reserved at 10 i, started at 10 i + (i % 3) (broken by 1 or 2 s when i % 3)."""
    jobs = [job(i) for i in range(n)]
    for i, j in enumerate(jobs):
        book.reserve(j, 10.0 * i, 0.0)
        book.started(j, 10.0 * i + i % 3)
    return jobs


def test_a_bounded_book_keeps_the_last_started_records_and_the_unbounded_totals():
    full, bounded = ReservationBook(), ReservationBook()
    bounded.bound(3)
    play(full, 10)
    jobs = play(bounded, 10)
    assert len(full.records) == 10
    assert list(bounded.records) == jobs[7:]   # the last 3 started
    assert bounded.summary() == {**full.summary(), "withdrawn": 0}
    assert full.summary()["broken"] == 6 and full.summary()["max_delay_broken_s"] == 2.0
    assert full.summary()["mean_delay_broken_s"] == 1.5


def test_a_bounded_book_drops_a_withdrawn_jobs_record_at_its_vcs_next_pass():
    book = ReservationBook()
    book.bound(5)
    a, b, c = job(0), job(1), job(2)
    book.reserve(a, 5.0, 0.0)
    book.reserve(b, 7.0, 0.0)
    book.begin(0)                  # a later pass: only b is reserved again (EASY's new head)
    book.reserve(b, 7.0, 1.0)
    book.reserve(c, 9.0, 1.0)
    book.waiting(0, [b])           # a and c left without starting
    assert list(book.records) == [b] and book.withdrawn == 2
    book.started(b, 7.0)
    assert book.summary()["made"] == 3 and book.summary()["kept"] == 1 and book.summary()["withdrawn"] == 2
    with pytest.raises(ValueError, match=">= 0 started records"):
        book.bound(-1)


def test_the_simulators_book_is_unbounded_and_has_no_withdrawn_count():
    book = ReservationBook()
    play(book, 4)
    assert book.keep is None and len(book.records) == 4 and "withdrawn" not in book.summary()


def test_the_live_service_bounds_its_policys_book_and_drops_deleted_pods_records():
    pytest.importorskip("sqlalchemy")
    clock = lambda: 1000.0   # noqa: E731 - a fixed clock
    core = SchedulerCore(make_policy("easy", estimate="limit"), Store("sqlite://"), clock=clock)
    book = core.adapter.policy.book
    assert book.keep == LIVE_RECORDS_KEPT
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    ann = {"dlsched.io/time-limit-seconds": "100"}
    core.pod_seen(PodFacts("r", "ml", "r", 4, "", "Pending", False, 1.0, annotations=dict(ann)))
    core.run_pass()
    core.pod_seen(PodFacts("r", "ml", "r", 4, "n", "Running", False, 1.0, annotations=dict(ann)))
    core.pod_seen(PodFacts("big", "ml", "big", 4, "", "Pending", False, 2.0, annotations=dict(ann)))
    core.run_pass()
    assert [j.job_id for j in book.records] == ["big"]   # reserved at the running pod's limit
    core.pod_gone("big")                                  # deleted while it waited
    core.pod_seen(PodFacts("next", "ml", "next", 4, "", "Pending", False, 3.0, annotations=dict(ann)))
    core.run_pass()
    assert [j.job_id for j in book.records] == ["next"] and book.withdrawn == 1
