"""The per-user queue of LAS and fair share (sched/per_user.py) kept incrementally against the
sorted list it replaces (``PerUserQueue.incremental = False``): random traces with several users,
with and without backfill. Every job must get the same start and end, and every start in the same
order."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dlsched.core.cluster import ClusterSpec, gpu_type
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sched.per_user import PerUserQueue, SortedPerUserQueue
from dlsched.sim import SimConfig, Simulator


class Starts:
    def __init__(self) -> None:
        self.log: list[tuple] = []

    def started(self, job: Job, vc, now: float) -> None:
        self.log.append((job.job_id, now))


def run(jobs: list[Job], cluster: ClusterSpec, policy: str, options: dict, incremental: bool) -> tuple:
    PerUserQueue.incremental = incremental
    try:
        starts = Starts()
        sim = Simulator(cluster, make_policy(policy, **options), SimConfig(check_invariants=True), observers=(starts,))
        result = sim.run(jobs)
        kinds = {type(vc.queue) for vc in sim.state.vcs}
    finally:
        PerUserQueue.incremental = True
    assert kinds == {PerUserQueue if incremental else SortedPerUserQueue}
    return sorted((j.job_id, j.start_time, j.end_time) for j in result.jobs), starts.log


@st.composite
def traces(draw) -> tuple[list[Job], ClusterSpec]:
    per_node = draw(st.sampled_from([2, 4, 8]))
    vcs = {f"vc{i}": draw(st.integers(1, 3)) for i in range(draw(st.integers(1, 2)))}
    cluster = ClusterSpec.from_vc_sizes(vcs, per_node, gpu_type("V100"))
    users = [None, "", "ann", "bob", "cy", "dee"][: draw(st.integers(2, 6))]
    jobs = []
    for i in range(draw(st.integers(1, 40))):
        vc = draw(st.sampled_from(sorted(vcs)))
        gpus = draw(st.sampled_from([g for g in (1, 1, 2, 4, 8) if g <= vcs[vc] * per_node]))
        jobs.append(Job(f"j{i}", vc, gpus, float(draw(st.integers(0, 300))), float(draw(st.integers(1, 900))),
                        user=draw(st.sampled_from(users))))
    return jobs, cluster


CASES = [("las", {"threshold": 200.0}), ("las", {"threshold": 500.0, "backfill": True}),
         ("fairshare", {"half_life": 300.0}), ("fairshare", {"half_life": 300.0, "backfill": True})]


@pytest.mark.parametrize("case", CASES, ids=[f"{c[0]}-{'backfill' if c[1].get('backfill') else 'blocking'}"
                                             for c in CASES])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_incremental_queue_decides_as_the_sorted_list(case, data):
    jobs, cluster = data.draw(traces())
    policy, options = case
    assert run(jobs, cluster, policy, options, True) == run(jobs, cluster, policy, options, False)


def test_the_head_follows_the_ranks_users_and_submissions():
    class Ranks:
        def __init__(self) -> None:
            self.version = 0
            self.rank = {"a": 1.0, "b": 0.0}

        def user_rank(self, user: str) -> float:
            return self.rank[user]

    ranks = Ranks()
    queue = PerUserQueue(ranks)
    jobs = [Job("a1", "v", 1, 0.0, 1.0, user="a"), Job("b1", "v", 2, 5.0, 1.0, user="b"),
            Job("b2", "v", 1, 1.0, 1.0, user="b"), Job("a2", "v", 1, 0.5, 1.0, user="a")]
    for seq, job in enumerate(jobs):
        job.enq_seq = seq
        queue.push(job)
    assert [j.job_id for j in queue] == ["b2", "b1", "a1", "a2"] and queue.head().job_id == "b2"
    queue.remove(jobs[2])
    assert queue.head().job_id == "b1" and len(queue) == 3 and queue.gpus == 4
    ranks.rank, ranks.version = {"a": 0.0, "b": 1.0}, 1  # the policy re-ranked its users
    assert queue.head().job_id == "a1"
    for job in (jobs[0], jobs[3], jobs[1]):
        queue.remove(job)
    assert queue.head() is None and list(queue) == []


def test_a_policy_whose_ranks_follow_its_version_keeps_them_across_pushes():
    """LAS's case: a push does not re-rank every user; a re-queued job that was submitted before
    its user's current head goes before it, and a new user gets its rank at its first push."""
    class Levels:
        ranks_follow_version = True

        def __init__(self) -> None:
            self.version, self.asked = 0, []

        def user_rank(self, user: str) -> float:
            self.asked.append(user)
            return {"a": 0.0, "b": 1.0, "c": 0.5}[user]

    levels = Levels()
    queue = PerUserQueue(levels)
    a2, b1 = Job("a2", "v", 1, 10.0, 1.0, user="a"), Job("b1", "v", 1, 0.0, 1.0, user="b")
    for seq, job in enumerate((a2, b1)):
        job.enq_seq = seq
        queue.push(job)
    assert queue.head() is a2 and sorted(levels.asked) == ["a", "b"]
    a1, c1 = Job("a1", "v", 1, 5.0, 1.0, user="a"), Job("c1", "v", 1, 1.0, 1.0, user="c")
    a1.enq_seq, c1.enq_seq = 2, 3
    queue.push(a1)  # submitted before a2 (a job queued again): it is a's head now
    queue.push(c1)
    assert levels.asked == ["a", "b", "c"]  # only the newcomer was ranked
    assert queue.head() is a1
    queue.remove(a1)
    assert queue.head() is a2
    queue.remove(a2)
    assert queue.head() is c1 and [j.job_id for j in queue] == ["c1", "b1"]
