"""The queue tree: nested cohorts with limits at every level, per-GPU-type limits, fair-share
weights over decayed usage per queue. Every number below is worked out by hand in the comments."""

from __future__ import annotations

import math

import pytest
from support.starts import Starts

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.core.truth import duration as true_duration
from dlsched.kernel.queue_tree import DecayedUsage, QueueSpec, QueueTree, borrowing_possible
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.traces.cluster_file import read_cluster_file
from dlsched.traces.cluster_queues import read_queues


def run(cluster, queues, the_jobs, half_life=7 * 86400.0, policy="fifo"):
    log = Starts()
    sim = Simulator(cluster, make_policy(policy, "consolidate"),
                    SimConfig(check_invariants=True, preemption_overhead=lambda job: 10.0, queues=queues,
                              queue_half_life=half_life), observers=(log,))
    res = sim.run(the_jobs)
    return res, {j.job_id: (j.start_time, j.end_time) for j in res.jobs}, log.rows


def decayed(segments, t: float, h: float) -> float:
    """sum over (gpus, start, end) of gpus * integral of 2^-((t - u) / h) du over [start, end]."""
    return sum(g * h / math.log(2) * (2 ** (-(t - e) / h) - 2 ** (-(t - s) / h)) for g, s, e in segments)


ORG = (QueueSpec("org", None, None), QueueSpec("lab", borrow_limit=4, lend_limit=None, parent="org"),
       QueueSpec("A", None, None, parent="lab"), QueueSpec("B", 0, None, parent="lab"),
       QueueSpec("C", 0, None, parent="org"))


def test_three_queues_nested_borrow_limit_and_reclaim():
    """org { lab { A, B }, C }: A borrows B inside lab without lab's limit, C only within lab's
    borrow_limit of 4 GPUs; B reclaims; C lends on."""
    cluster = ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1})
    the_jobs = [Job("a1", "A", 8, 0, 100), Job("a2", "A", 8, 1, 50), Job("a3", "A", 4, 2, 50),
                Job("a4", "A", 4, 3, 10), Job("b1", "B", 8, 10, 20), Job("c1", "C", 4, 20, 10)]
    res, t, starts = run(cluster, ORG, the_jobs)
    # a2 borrows B (inside lab: lab's limit does not apply); a3 borrows 4 of C (lab: 0 + 4 <= 4);
    # a4 would fit C's other 4 but lab would hold 8 > 4 outside: it waits. b1 at 10 reclaims a2
    # (ran 9 s: 41 left + 10 s checkpoint = 51). c1 at 20 fits C's own free 4. At 30 b1 and c1
    # end: a2 (FIFO head) borrows B again, 30 + 51 = 81; a4 still over lab's limit until a3
    # ends at 52, then borrows C: 52-62.
    assert t == {"a1": (0, 100), "a2": (1, 81), "a3": (2, 52), "a4": (52, 62), "b1": (10, 30), "c1": (20, 30)}
    assert starts == [("a1", 0, "A"), ("a2", 1, "B"), ("a3", 2, "C"), ("b1", 10, "B"), ("c1", 20, "C"),
                      ("a2", 30, "B"), ("a4", 52, "C")]
    q = res.extra["per_queue"]
    assert (q["A"]["reclaimed"], q["B"]["reclaims"], q["C"]["reclaims"]) == (1, 1, 0)
    assert q["A"]["borrowed_starts"] == 4
    h = 3600.0
    assert q["A"]["borrowed_gpu_hours"] * h == pytest.approx(8 * 9 + 4 * 50 + 8 * 51 + 4 * 10)
    assert q["B"]["lent_gpu_hours"] * h == pytest.approx(8 * 9 + 8 * 51)
    assert q["C"]["lent_gpu_hours"] * h == pytest.approx(4 * 50 + 4 * 10)
    inner = res.extra["per_inner_queue"]
    assert inner["lab"]["queues"] == ["A", "B"] and inner["lab"]["guarantee_gpus"] == 16
    assert inner["org"]["queues"] == ["A", "B", "C"] and inner["lab"]["borrow_limit"] == 4
    assert inner["lab"]["used_gpu_hours"] * h == pytest.approx(800 + 8 * 9 + 200 + 8 * 51 + 40 + 160)


def test_inner_lend_limit_bounds_its_subtree():
    """lab's lend_limit 0: C may borrow from neither A nor B, while A and B still lend inside lab."""
    specs = (QueueSpec("lab", None, 0), QueueSpec("A", None, None, parent="lab"),
             QueueSpec("B", None, None, parent="lab"), QueueSpec("C", None, None))
    tree = QueueTree(specs)
    assert tree.may_lend_between("A", "B") and not tree.may_lend_between("C", "A")
    assert tree.below_common("A", "B") == (("A",), ("B",))
    assert tree.below_common("C", "A") is None  # C is in the root cohort, A under top-level lab
    cluster = ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1})
    org = (QueueSpec("org", None, None), QueueSpec("lab", None, 0, parent="org"),
           QueueSpec("A", None, None, parent="lab"), QueueSpec("B", None, None, parent="lab"),
           QueueSpec("C", None, None, parent="org"))
    _, t, starts = run(cluster, org, [Job("c0", "C", 8, 0, 100), Job("c1", "C", 8, 1, 10),
                                      Job("a0", "A", 8, 0, 100), Job("a1", "A", 8, 2, 10)])
    # c1 may not borrow lab's idle B (lab lends nothing outside), a1 may (inside lab)
    assert t["c1"] == (100, 110) and ("a1", 2, "B") in starts
    assert not borrowing_possible((QueueSpec("lab", 0, None), QueueSpec("A", None, None, parent="lab"),
                                   QueueSpec("C", None, None, parent="top"), QueueSpec("B", None, None)))


def test_reclaim_takes_from_the_queue_with_most_usage_per_weight():
    """C reclaims 4 of its 8 GPUs lent 4 to A and 4 to B: from the queue with more decayed usage
    per weight; the weight turns the choice around."""
    cluster = ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1})
    the_jobs = [Job("a0", "A", 8, 0, 100), Job("b0", "B", 8, 0, 100), Job("a1", "A", 4, 1, 100),
                Job("b1", "B", 4, 2, 100), Job("c1", "C", 4, 10, 10)]

    def preempted(weight_a: float) -> list[str]:
        queues = (QueueSpec("A", None, 0, weight=weight_a), QueueSpec("B", None, 0), QueueSpec("C", 0, None))
        res, _, _ = run(cluster, queues, [Job(j.job_id, j.vc, j.gpus, j.submit_time, true_duration(j)) for j in the_jobs],
                        half_life=100.0)
        return [j.job_id for j in res.jobs if j.preemptions]

    # at 10 s: A has run 8 GPUs over 0-10 and 4 over 1-10, B 8 over 0-10 and 4 over 2-10
    ua = decayed([(8, 0, 10), (4, 1, 10)], 10, 100.0)
    ub = decayed([(8, 0, 10), (4, 2, 10)], 10, 100.0)
    assert ua == pytest.approx(112.19, abs=0.01) and ub == pytest.approx(108.42, abs=0.01)
    assert preempted(1.0) == ["a1"]     # A has more (b1, the most recent borrower, stays)
    assert preempted(2.0) == ["b1"]     # A's 112.19 / 2 < B's 108.42


def test_weighted_queues_borrow_in_fair_share_order():
    """A (2 nodes) and B (1) both wait when C's 8 GPUs come free at 50: the queue with less
    decayed usage per weight borrows them first."""
    cluster = ClusterSpec.from_vc_sizes({"A": 2, "B": 1, "C": 1})
    h = 100.0

    def times(weight_a: float):
        queues = (QueueSpec("A", None, None, weight=weight_a), QueueSpec("B", None, None), QueueSpec("C", 0, None))
        the_jobs = [Job("a0", "A", 16, 0, 100), Job("b0", "B", 8, 0, 100), Job("c0", "C", 8, 0, 50),
                    Job("a1", "A", 8, 5, 10), Job("b1", "B", 8, 5, 10)]
        res, t, _ = run(cluster, queues, the_jobs, half_life=h)
        return res, t

    # at 50: A used 16 GPUs for 50 s, B 8: decayed 16 * 100 / ln 2 * (1 - 2^-0.5) = 676.1 and 338.0
    assert decayed([(16, 0, 50)], 50, h) == pytest.approx(676.1, abs=0.1)
    assert decayed([(8, 0, 50)], 50, h) == pytest.approx(338.0, abs=0.1)
    res, t = times(1.0)   # 676.1 > 338.0: B first
    assert (t["b1"], t["a1"]) == ((50, 60), (60, 70))
    res, t = times(4.0)   # 676.1 / 4 = 169.0 < 338.0: A first
    assert (t["a1"], t["b1"]) == ((50, 60), (60, 70))
    q = res.extra["per_queue"]
    # the report's decayed usage at the run's end (100 s): every segment, decayed exactly
    ua = decayed([(16, 0, 100), (8, 50, 60)], 100, h)
    assert ua == pytest.approx(16 * 100 / math.log(2) * 0.5 + 8 * 100 / math.log(2) * (2 ** -0.4 - 2 ** -0.5))
    assert q["A"]["decayed_usage_gpu_hours"] * 3600 == pytest.approx(ua)
    assert q["A"]["weight"] == 4.0 and q["A"]["usage_per_weight"] == pytest.approx(ua / 4 / 3600)
    assert q["B"]["decayed_usage_gpu_hours"] * 3600 == pytest.approx(decayed([(8, 0, 100), (8, 60, 70)], 100, h))
    assert res.extra["fair_share_half_life"] == h


def test_decayed_usage_halves_over_one_half_life():
    u = DecayedUsage(100.0)
    u.change(8, 0.0)
    u.change(-8, 50.0)  # 8 GPUs over 0-50
    assert u.at(50.0) == pytest.approx(8 * 100 / math.log(2) * (1 - 2 ** -0.5))  # 338.0 GPU-s
    assert u.at(150.0) == pytest.approx(u.at(50.0) / 2)
    assert u.at(250.0) == pytest.approx(u.at(50.0) / 4)


PER_TYPE = """[defaults]
gpus = 8

[[groups]]
vc = "A"
nodes = 1
gpu = "V100"

[[groups]]
vc = "L1"
nodes = 1
gpu = "A100"

[[groups]]
vc = "L2"
nodes = 1
gpu = "V100"

[[queues]]
name = "A"
borrow_limit = LIMIT

[[queues]]
name = "L1"
borrow_limit = 0

[[queues]]
name = "L2"
borrow_limit = 0
"""


@pytest.mark.parametrize("limit,expect", [
    # a1 borrows 4 A100 of L1 (the lender with most free GPUs first: L1 and L2 tie, L1 is first);
    # a2: L2 (8 free) offers V100, which A may not borrow; L1 would hold 8 A100 > 4: waits for a1
    ("{A100 = 4}", {"a1": (1, 11, "L1"), "a2": (11, 21, "L1")}),
    # a1 on L1 is refused (A100 not named), so L2's V100; a2: L1 refused, L2 would hold 8 > 4
    ("{V100 = 4}", {"a1": (1, 11, "L2"), "a2": (11, 21, "L2")}),
    # a plain number: GPUs of any type; a2 goes to L2, which has more free GPUs
    ("8", {"a1": (1, 11, "L1"), "a2": (2, 12, "L2")}),
])
def test_per_type_borrow_limits(tmp_path, limit, expect):
    path = tmp_path / "c.toml"
    path.write_text(PER_TYPE.replace("LIMIT", limit))
    cluster, queues = read_cluster_file(path), read_queues(path)
    the_jobs = [Job("a0", "A", 8, 0, 100), Job("a1", "A", 4, 1, 10), Job("a2", "A", 4, 2, 10)]
    res, t, starts = run(cluster, queues, the_jobs)
    where = {job: host for job, _, host in starts}
    assert {j: (*t[j], where[j]) for j in ("a1", "a2")} == expect
    row = res.extra["per_queue"]["A"]
    if limit.startswith("{"):
        assert row["borrow_limit_by_type"] == {limit[1:5]: 4} and row["borrow_limit"] is None


def test_check_finds_counters_that_lie_and_limits_exceeded():
    from dlsched.kernel.quotas import QuotaManager
    from dlsched.kernel.state import ClusterState, StateError

    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), new_queue=make_policy("fifo").new_queue)
    manager = QuotaManager(ORG, state)
    manager.check()  # nothing borrowed: consistent
    manager.out_total["lab"] = 4
    with pytest.raises(StateError, match="queue lab: borrowed GPUs counted"):
        manager.check()
    manager.out_total["lab"] = 0
    job = Job("a", "A", 8, 0, 10)
    state.submit(job, 0.0)
    manager._loans[job] = (("A", "lab"), ("C",), {"V100": 8})
    manager._book(job, 1)  # booked past lab's borrow_limit of 4, as a buggy borrow would
    state.start_borrowed(job, state.vcs[state.vc_index["C"]], [(2, 0xFF)], 0.0)
    with pytest.raises(StateError, match=r"queue lab: borrowed GPUs \{'V100': 8\} over its limit"):
        manager.check()
