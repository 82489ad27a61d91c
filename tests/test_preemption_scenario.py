"""The done-when scenario of issue 26 point 2 in the simulator, hand-checked (tests/support/preemption.py).

A short job with a shorter predicted remaining time evicts a long running one; the evicted job
re-queues with its attained service and restarts before a later job whose prediction is shorter
than the long job's *total* but longer than what the long job has left. With a minimum run time
above the elapsed time the short job waits for it instead.
"""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from tests.support.preemption import OVERHEAD_S, StartLog, preemption_cluster, preemption_jobs


def run(**params):
    log = StartLog()
    policy = make_policy("srtf-pred", source="job", **params)
    sim = Simulator(preemption_cluster(), policy, SimConfig(check_invariants=True,
                                                            preemption_overhead=lambda job: OVERHEAD_S),
                    observers=(log,))
    result = sim.run(preemption_jobs())
    return result, log, {j.job_id: j for j in result.jobs}


def test_short_job_evicts_the_long_one_which_keeps_its_attained_service():
    result, log, jobs = run()
    # long runs 0-1000 (1,000 s done), evicted for short; short 1000-1600; long restarts at 1600 with
    # 10,000 - 1,000 + 30 s overhead = 9,030 s left -> 10,630; medium (11,500 s predicted) waits behind
    # long (12,000 - 1,000 attained = 11,000 s predicted left) and runs 10,630-12,630.
    assert log.starts() == [(0.0, "long"), (1000.0, "short"), (1600.0, "long"), (10_630.0, "medium")]
    assert [e for e in log.events if e[1] == "preempt"] == [(1000.0, "preempt", "long")]
    assert (jobs["long"].start_time, jobs["long"].end_time, jobs["long"].preemptions) == (0.0, 10_630.0, 1)
    assert (jobs["short"].end_time, jobs["medium"].end_time) == (1600.0, 12_630.0)
    assert jobs["long"].queue_delay == pytest.approx(600.0)  # waited 1000-1600
    assert result.extra["evictions"] == 1 and result.extra["evictions_refused_min_run"] == 0


def test_min_run_time_above_the_elapsed_time_makes_the_short_job_wait():
    result, log, jobs = run(min_run_s=1500.0)
    # at 1000 long has run 1,000 s < 1,500: refused, and the pass wakes at 1500 to evict it then.
    # long restarts at 2100 with 10,000 - 1,500 + 30 = 8,530 s left -> 10,630.
    assert log.starts() == [(0.0, "long"), (1500.0, "short"), (2100.0, "long"), (10_630.0, "medium")]
    assert [e for e in log.events if e[1] == "preempt"] == [(1500.0, "preempt", "long")]
    assert jobs["short"].queue_delay == pytest.approx(500.0)
    assert result.extra["evictions"] == 1 and result.extra["evictions_refused_min_run"] == 1


def test_min_run_time_longer_than_the_job_means_no_eviction():
    result, log, jobs = run(min_run_s=20_000.0)
    # short waits for long to finish at 10,000; then short (500 s predicted) before medium
    assert log.starts() == [(0.0, "long"), (10_000.0, "short"), (10_600.0, "medium")]
    assert jobs["long"].preemptions == 0
    assert result.extra["evictions"] == 0 and result.extra["evictions_refused_min_run"] == 1


def test_eviction_cap_zero_never_evicts():
    result, log, _ = run(max_evictions=0)
    assert log.starts() == [(0.0, "long"), (10_000.0, "short"), (10_600.0, "medium")]
    assert result.extra["evictions"] == 0 and result.extra["evictions_refused_cap"] == 1


def test_grace_period_raises_the_overhead_to_at_least_itself():
    # a 200 s grace period > the 30 s overhead: long restarts at 1600 with 10,000 - 1,000 + 200 s
    _, log, jobs = run(grace_s=200.0)
    assert log.starts()[:3] == [(0.0, "long"), (1000.0, "short"), (1600.0, "long")]
    assert jobs["long"].end_time == pytest.approx(10_800.0)
    # a grace period below the run's overhead changes nothing
    _, _, jobs = run(grace_s=10.0)
    assert jobs["long"].end_time == pytest.approx(10_630.0)
