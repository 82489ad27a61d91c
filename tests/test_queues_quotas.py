"""Queues with quotas: borrowing, lending limits and reclaim on a hand-checked 3-VC example."""

from __future__ import annotations

import pytest
from support.starts import Starts

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.quotas import QueueSpec, jain
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, SimulationError, Simulator


def three_vcs():
    return ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1})  # one 8-GPU node each


QUEUES = (QueueSpec("A", borrow_limit=8, lend_limit=None), QueueSpec("B", borrow_limit=0, lend_limit=4),
          QueueSpec("C", borrow_limit=0, lend_limit=None))


def jobs():
    return [Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 1, 50), Job("a3", "A", 4, 2, 50),
            Job("a4", "A", 2, 3, 10), Job("c1", "C", 8, 10, 20)]


def run(queues=QUEUES, policy="fifo", the_jobs=None):
    log = Starts()
    sim = Simulator(three_vcs(), make_policy(policy, "consolidate"),
                    SimConfig(check_invariants=True, preemption_overhead=lambda job: 10.0, queues=queues),
                    observers=(log,))
    res = sim.run(the_jobs or jobs())
    return res, log.rows


def test_borrow_lend_limit_and_reclaim_exact_times():
    res, starts = run()
    t = {j.job_id: (j.start_time, j.end_time) for j in res.jobs}
    # a2 borrows B (lend limit 4 reached), a3 borrows C; a4 waits: A's borrow limit 8 is used.
    # c1 arrives at 10: C reclaims a3 (10 - 2 = 8 s done, 42 left + 10 s overhead); a3 borrows C
    # again when c1 ends at 30 (B may lend no more), ends 30 + 52 = 82; a4 borrows B at 51 when a2
    # ends and A's borrowed GPUs drop to 4.
    assert t == {"a1": (0, 100), "a2": (1, 51), "a3": (2, 82), "a4": (51, 61), "c1": (10, 30)}
    assert starts == [("a1", 0, "A"), ("a2", 1, "B"), ("a3", 2, "C"), ("c1", 10, "C"), ("a3", 30, "C"),
                      ("a4", 51, "B")]
    a3 = next(j for j in res.jobs if j.job_id == "a3")
    assert a3.preemptions == 1 and a3.queue_delay == 20
    q = res.extra["per_queue"]
    assert q["A"]["reclaimed"] == 1 and q["C"]["reclaims"] == 1 and q["B"]["reclaims"] == 0
    assert q["A"]["borrowed_starts"] == 4
    hours = 3600.0
    assert q["A"]["used_gpu_hours"] * hours == pytest.approx(800 + 200 + 8 * 4 + 52 * 4 + 20)
    assert q["A"]["borrowed_gpu_hours"] * hours == pytest.approx(200 + 32 + 208 + 20)
    assert q["B"]["lent_gpu_hours"] * hours == pytest.approx(200 + 20)
    assert q["C"]["lent_gpu_hours"] * hours == pytest.approx(32 + 208)
    assert q["C"]["used_gpu_hours"] * hours == pytest.approx(160)
    assert q["A"]["guaranteed_gpu_hours"] * hours == pytest.approx(8 * 100)  # 8 GPUs over 0..100
    assert q["A"]["avg_queue_delay"] == pytest.approx((0 + 0 + 20 + 48) / 4)
    shares = [1260 / 800, 0.0, 160 / 800]  # used / guaranteed GPU time of A, B, C
    assert res.extra["queue_fairness_jain"] == pytest.approx(jain(shares))
    assert jain([1.0, 1.0]) == 1.0 and jain([1.0, 0.0]) == 0.5


def test_no_borrowing_is_todays_fixed_vcs():
    fixed = tuple(QueueSpec(q.name, borrow_limit=0, lend_limit=q.lend_limit) for q in QUEUES)
    res, starts = run(fixed)
    plain = Simulator(three_vcs(), make_policy("fifo", "consolidate"),
                      SimConfig(check_invariants=True, preemption_overhead=lambda job: 10.0)).run(jobs())
    assert [(j.job_id, j.start_time, j.end_time) for j in res.jobs] == \
        [(j.job_id, j.start_time, j.end_time) for j in plain.jobs]
    assert "per_queue" not in res.extra  # nothing to borrow: the manager is not installed
    assert all(host == name[0].upper() for name, _, host in starts)


def test_lender_with_waiting_jobs_does_not_lend():
    the_jobs = [Job("b1", "B", 8, 0, 100), Job("b2", "B", 4, 1, 10), Job("a1", "A", 8, 0, 100),
                Job("a2", "A", 4, 2, 10)]
    queues = (QueueSpec("A", 8, None), QueueSpec("B", 8, None), QueueSpec("C", 0, 0))
    res, _ = run(queues, the_jobs=the_jobs)
    t = {j.job_id: (j.start_time, j.end_time) for j in res.jobs}
    assert t["b2"] == (100, 110) and t["a2"] == (100, 110)  # C lends nothing; A and B are full


def test_cohorts_keep_borrowing_inside():
    queues = (QueueSpec("A", 8, None, parent="x"), QueueSpec("B", 0, None, parent="y"),
              QueueSpec("C", 0, None, parent="x"))
    the_jobs = [Job("a1", "A", 8, 0, 100), Job("a2", "A", 8, 1, 10)]
    _, starts = run(queues, the_jobs=the_jobs)
    assert ("a2", 1, "C") in starts  # B is of another cohort; C (same parent) lends


def test_preemptive_policy_is_refused():
    with pytest.raises(SimulationError, match="non-preemptive"):
        run(policy="srtf")


def test_reclaim_takes_the_most_recent_borrower_only():
    queues = (QueueSpec("A", 8, None), QueueSpec("B", 0, 0), QueueSpec("C", 0, None))
    the_jobs = [Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 1, 50), Job("a3", "A", 4, 2, 50),
                Job("c1", "C", 4, 10, 20)]
    res, _ = run(queues, the_jobs=the_jobs)
    t = {j.job_id: (j.start_time, j.end_time, j.preemptions) for j in res.jobs}
    # c1 needs 4 of C's 8 GPUs, both lent: only a3 (started last) is reclaimed; it borrows C
    # again when c1 ends at 30 with 50 - 8 + 10 = 52 s left
    assert t == {"a1": (0, 100, 0), "a2": (1, 51, 0), "a3": (2, 82, 1), "c1": (10, 30, 0)}
    assert res.extra["per_queue"]["C"]["reclaims"] == 1


def test_lender_waits_for_its_own_jobs_without_reclaiming():
    queues = (QueueSpec("A", 8, None), QueueSpec("B", 0, 0), QueueSpec("C", 0, None))
    the_jobs = [Job("c0", "C", 6, 0, 100), Job("a1", "A", 8, 0, 100), Job("a2", "A", 2, 1, 50),
                Job("c1", "C", 8, 10, 20)]
    res, _ = run(queues, the_jobs=the_jobs)
    t = {j.job_id: (j.start_time, j.end_time, j.preemptions) for j in res.jobs}
    # c1 needs all 8 GPUs; C's own c0 holds 6 until 100: reclaiming a2's 2 would not make it fit
    assert t == {"c0": (0, 100, 0), "a1": (0, 100, 0), "a2": (1, 51, 0), "c1": (100, 120, 0)}


def test_active_entitlement_counts_only_time_with_jobs():
    res, _ = run()
    q = res.extra["per_queue"]
    # A has jobs from 0 to 100, C from 10 to 30, B never
    assert q["A"]["active_hours"] * 3600 == pytest.approx(100) and q["C"]["active_hours"] * 3600 == pytest.approx(20)
    assert q["B"]["active_hours"] == 0 and q["B"]["share_of_active_guarantee"] is None
    assert q["A"]["share_of_active_guarantee"] == pytest.approx(1260 / 800)
    assert q["C"]["share_of_active_guarantee"] == pytest.approx(160 / 160)
    assert res.extra["queue_fairness_jain_active"] == pytest.approx(jain([1260 / 800, 1.0]))


def test_a_job_killed_at_its_time_limit_ends_its_queues_active_time():
    # "capped" runs 0-40 in A and is killed at its limit (StopReason.TIME_LIMIT): A has no job from
    # 40 on, so its active time is 40 s, not the whole run (c1 in C keeps the run going to 120)
    the_jobs = [Job("capped", "A", 8, 0, 1000, time_limit_s=40), Job("c1", "C", 8, 100, 20)]
    res, starts = run(the_jobs=the_jobs)
    assert {j.job_id: (j.start_time, j.end_time) for j in res.jobs} == {"capped": (0, 40), "c1": (100, 120)}
    q = res.extra["per_queue"]
    assert q["A"]["active_hours"] * 3600.0 == pytest.approx(40.0)
    assert q["C"]["active_hours"] * 3600.0 == pytest.approx(20.0)
    assert q["A"]["used_gpu_hours"] * 3600.0 == pytest.approx(8 * 40)
    assert q["A"]["share_of_active_guarantee"] == pytest.approx(1.0)
