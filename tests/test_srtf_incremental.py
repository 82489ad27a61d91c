"""SRTF's incremental cut (sched/policies/srtf_order.py) against the full sort it replaces
(``SrtfPolicy.incremental = False``): random congested traces, true and predicted remaining time,
with and without the Helios tick, a speed model and the checkpoint overhead. Every job must get the
same starts, stops and finish time, and every start and stop must come in the same order."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.registry import make_policy
from dlsched.sched.policies.srtf import SrtfPolicy
from dlsched.sched.policies.srtf_order import RankQueue
from dlsched.sim import SimConfig, Simulator


class Log:
    """Kernel observer: every start and stop, in order."""

    def __init__(self) -> None:
        self.events: list[tuple] = []

    def started(self, job: Job, vc, now: float) -> None:
        self.events.append(("start", job.job_id, now))

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self.events.append((why, job.job_id, now))


def run(jobs: list[Job], cluster: ClusterSpec, policy: str, incremental: bool, compat: str = "none",
        sliced: bool = False, options: dict | None = None) -> tuple:
    SrtfPolicy.incremental = incremental
    try:
        pol = make_policy(policy, share=sliced, **(options or {}))
        log = Log()
        cfg = SimConfig(compat=compat, max_jobs_per_gpu=2 if sliced else 1, check_invariants=True)
        sim = Simulator(cluster, pol, cfg, speed_model=TimeSlicedSpeed() if sliced else None, observers=(log,))
        result = sim.run(jobs)
        queue_kinds = {type(vc.queue) for vc in sim.state.vcs}
    finally:
        SrtfPolicy.incremental = True
    assert queue_kinds == ({RankQueue} if incremental else queue_kinds - {RankQueue})
    per_job = sorted((j.job_id, j.start_time, j.end_time, j.preemptions, j.queue_delay) for j in result.jobs)
    return per_job, log.events


@st.composite
def traces(draw, integer_times: bool) -> tuple[list[Job], ClusterSpec]:
    per_node = draw(st.sampled_from([2, 4, 8]))
    vcs = {f"vc{i}": draw(st.integers(1, 3)) for i in range(draw(st.integers(1, 2)))}
    cluster = ClusterSpec.from_vc_sizes(vcs, per_node, gpu_type("V100"))
    time = st.integers(0, 400).map(float) if integer_times else st.floats(0.0, 400.0, allow_nan=False)
    length = st.integers(1, 600).map(float) if integer_times else st.floats(0.5, 600.0, allow_nan=False)
    jobs = []
    for i in range(draw(st.integers(1, 40))):
        vc = draw(st.sampled_from(sorted(vcs)))
        top = vcs[vc] * per_node
        gpus = draw(st.sampled_from([g for g in (1, 1, 1, 2, 3, 4, 8, 16) if g <= top]))
        job = Job(f"j{i}", vc, gpus, draw(time), draw(length), gpu_util=float(draw(st.integers(5, 100))))
        job.pred_duration = draw(length)
        jobs.append(job)
    return jobs, cluster


CASES = [
    ("srtf", "none", False, {}),
    ("srtf", "helios", False, {}),      # the 1-s tick: running jobs rank at 0 remaining for a second
    ("srtf", "none", True, {}),         # time-sliced speeds: remaining time moves at other rates
    ("srtf-pred", "none", False, {"source": "job"}),
    ("srtf-pred", "helios", False, {"source": "job"}),
]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{c[1]}" + ("-sliced" if c[2] else "") for c in CASES])
@pytest.mark.parametrize("integer_times", [True, False], ids=["integer-times", "float-times"])
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_cut_decides_as_the_full_sort(case, integer_times, data):
    jobs, cluster = data.draw(traces(integer_times))
    policy, compat, sliced, options = case
    fast = run(jobs, cluster, policy, True, compat, sliced, options)
    full = run(jobs, cluster, policy, False, compat, sliced, options)
    assert fast[0] == full[0]  # start, end, preemptions, queueing delay of every job
    assert fast[1] == full[1]  # every start and stop, in order
    assert all(not math.isnan(end) for _, _, end, _, _ in fast[0])


def test_a_congested_trace_preempts_and_both_paths_agree():
    """A hand-sized case that surely takes the cut (the queue exceeds the quota) and preempts:
    long jobs hold the VC's 8 GPUs when short ones arrive."""
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, 8, gpu_type("V100"))
    jobs = [Job(f"long{i}", "v", 4, 0.0, 1000.0) for i in range(2)]
    jobs += [Job(f"short{i}", "v", g, 10.0 + i, 50.0) for i, g in enumerate((4, 2, 1, 8, 1))]
    fast, full = run(jobs, cluster, "srtf", True), run(jobs, cluster, "srtf", False)
    assert fast == full
    preempted = {job_id for why, job_id, _ in fast[1] if why == "preempt"}
    assert preempted == {"long0", "long1"}


def test_the_rank_queue_keeps_arrival_order_and_forgets_the_jobs_that_left():
    queue = RankQueue()
    jobs = [Job(f"j{i}", "v", 1 + i % 2, float(i), 10.0 * (5 - i)) for i in range(5)]
    for seq, job in enumerate(jobs):
        job.enq_seq = seq
        queue.push(job)
    heaps = queue.rank_new(lambda j: j._remaining)
    assert sorted(heaps) == [1, 2] and queue.jobs() == jobs and queue.head() is jobs[0]
    queue.remove(jobs[4])
    assert len(queue) == 4 and queue.gpus == 1 + 2 + 1 + 2
    live = sorted(e for heap in heaps.values() for e in heap if queue.live(e))
    assert [e[2].job_id for e in live] == ["j3", "j2", "j1", "j0"]  # by remaining time
