"""Borrowing and reclaim through the kernel's one entry point (``Kernel.handle``).

Live (``assume=True``) a borrowed start is a ``Bind`` on the lender's node and a reclaim is an
``Evict`` request: the victim keeps its GPUs until ``JobEvicted``. Every step of the 3-queue
example below is worked out by hand in the comments. With ``assume=False`` the same entry point
must make the simulator's decisions, job for job, with borrowing and reclaims on. And per-GPU-type
limits restrict a lender's nodes before its placer picks GPUs.
"""

from __future__ import annotations

import pytest
from support.kernel_driver import feed
from support.starts import Starts

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.quotas import QueueSpec, QuotaManager
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import (
    Bind,
    BindFailed,
    BindSucceeded,
    Evict,
    JobEvicted,
    JobFinished,
    JobSubmitted,
    PassRequested,
    QueuesChanged,
    TimerFired,
)
from dlsched.registry import make_policy
from dlsched.sched.actions import rebalance
from dlsched.sim import SimConfig, Simulator
from dlsched.traces.cluster_file import read_cluster_file
from dlsched.traces.cluster_queues import read_queues
from dlsched.traces.synthetic import generate

# A may borrow 8 GPUs; B lends at most 4; C lends without limit. One 8-GPU node each:
# node 0 is A's, node 1 B's, node 2 C's.
QUEUES = (QueueSpec("A", borrow_limit=8, lend_limit=None), QueueSpec("B", borrow_limit=0, lend_limit=4),
          QueueSpec("C", borrow_limit=0, lend_limit=None))
LOW4, ALL8 = 0x0F, 0xFF


def live_kernel(queues=QUEUES):
    policy = make_policy("fifo", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), new_queue=policy.new_queue)
    quotas = QuotaManager(queues, state)
    kernel = Kernel(state, policy, assume=True, quotas=quotas, rebalance=rebalance)
    kernel.prepare()
    return state, quotas, kernel


def checked(state, quotas) -> None:
    state.check_invariants()
    quotas.check()


def test_live_borrow_reclaim_and_a_failed_borrowed_bind_hand_checked():
    state, quotas, kernel = live_kernel()
    _, B, C = state.vcs
    a1, a2, a3, c1 = (Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 1, 50), Job("a3", "A", 4, 2, 50),
                      Job("c1", "C", 8, 10, 20))
    # 0: a1 fills A's own node
    kernel.handle(JobSubmitted(a1), 0.0)
    assert kernel.handle(PassRequested(), 0.0) == [Bind(a1, ((0, ALL8),), False)]
    kernel.handle(BindSucceeded(a1), 0.0)
    # 1: a2 does not fit at home; B and C both have 8 free, B first (lower index): a
    # nomination on B's node, the loan booked before the bind
    kernel.handle(JobSubmitted(a2), 1.0)
    assert kernel.handle(PassRequested(), 1.0) == [Bind(a2, ((1, LOW4),), False)]
    assert a2.state is JobState.ASSUMED and state.hosts[a2] is B
    assert quotas.borrowed == [4, 0, 0] and quotas.lent == [0, 4, 0]
    checked(state, quotas)
    kernel.handle(BindSucceeded(a2), 1.0)
    # 2: a3: C has 8 free, B 4 (and B's lend limit of 4 is used): C's node
    kernel.handle(JobSubmitted(a3), 2.0)
    assert kernel.handle(PassRequested(), 2.0) == [Bind(a3, ((2, LOW4),), False)]
    checked(state, quotas)
    # 3: the bind fails: the loan goes back with the GPUs, and the next pass borrows again
    kernel.handle(BindFailed(a3, "node went away"), 3.0)
    assert a3.state is JobState.PENDING and quotas.borrowed == [4, 0, 0] and quotas.lent == [0, 4, 0]
    assert state.node_mask[2] == 0
    checked(state, quotas)
    assert kernel.handle(PassRequested(), 3.0) == [Bind(a3, ((2, LOW4),), False)]
    kernel.handle(BindSucceeded(a3), 3.0)
    assert quotas.borrowed == [8, 0, 0] and quotas.lent == [0, 4, 4]
    assert quotas.borrow_starts == [3, 0, 0]
    # 10: c1 needs C's 8 GPUs; a3 holds 4 of them: a reclaim, asked for, not yet done
    kernel.handle(JobSubmitted(c1), 10.0)
    [evict] = kernel.handle(PassRequested(), 10.0)
    assert type(evict) is Evict and evict.job is a3 and evict.for_job is c1
    assert evict.reason == "reclaim for queue C: its guaranteed GPUs are lent; for job c1"
    assert a3.state is JobState.RUNNING and state.node_mask[2] == LOW4   # still holds its GPUs
    assert quotas.evicting == {a3: C} and quotas.reclaims == [0, 0, 1] and quotas.reclaimed == [1, 0, 0]
    checked(state, quotas)
    # later passes (a timer of C's, a new job elsewhere) ask for no second eviction, and
    # A's blocked jobs do not borrow C's GPUs that are being reclaimed
    assert kernel.handle(TimerFired(("vc", C.vid)), 11.0) == []
    b1 = Job("b1", "B", 2, 12, 5)
    kernel.handle(JobSubmitted(b1), 12.0)
    assert kernel.handle(PassRequested(), 12.0) == [Bind(b1, ((1, 0x30),), False)]
    kernel.handle(BindSucceeded(b1), 12.0)
    assert quotas.reclaims == [0, 0, 1]
    checked(state, quotas)
    # 15: a3's pod is gone: it queues again with its service; C's head starts on its own node
    actions = kernel.handle(JobEvicted(a3), 15.0)
    assert actions == [] and a3.state is JobState.PENDING and a3.preemptions == 1
    assert quotas.evicting == {} and quotas.borrowed == [4, 0, 0] and quotas.lent == [0, 4, 0]
    checked(state, quotas)
    # a3 may not borrow: C is full, B has lent its 4, A's own node is a1's
    assert kernel.handle(PassRequested(), 15.0) == [Bind(c1, ((2, ALL8),), False)]
    kernel.handle(BindSucceeded(c1), 15.0)
    checked(state, quotas)
    # 35: c1 ends: C has no job waiting and lends again; a3 borrows it
    kernel.handle(JobFinished(c1), 35.0)
    assert kernel.handle(PassRequested(), 35.0) == [Bind(a3, ((2, LOW4),), False)]
    checked(state, quotas)


def test_evictions_in_flight_count_as_free_when_choosing_victims():
    """Two borrowers on C's node, 4 GPUs each; C's head needs 4: one eviction, not two, and the
    same one is not asked for again; a second head that needs the other 4 asks for the second."""
    state, quotas, kernel = live_kernel((QueueSpec("A", borrow_limit=16), *QUEUES[1:]))
    C = state.vcs[2]
    c_jobs = [Job(f"a{i}", "A", 4, 0, 100) for i in range(4)]   # a0, a1: A's node; a2 -> B, a3 -> C
    for job in c_jobs:
        kernel.handle(JobSubmitted(job), 0.0)
    binds = kernel.handle(PassRequested(), 0.0)
    assert [(b.job.job_id, b.placement) for b in binds] == [
        ("a0", ((0, LOW4),)), ("a1", ((0, 0xF0),)), ("a2", ((1, LOW4),)), ("a3", ((2, LOW4),))]
    for b in binds:
        kernel.handle(BindSucceeded(b.job), 0.0)
    a4 = Job("a4", "A", 4, 1, 100)   # B has lent its 4: C's other half
    kernel.handle(JobSubmitted(a4), 1.0)
    assert kernel.handle(PassRequested(), 1.0) == [Bind(a4, ((2, 0xF0),), False)]
    kernel.handle(BindSucceeded(a4), 1.0)
    c1 = Job("c1", "C", 4, 5, 10)
    kernel.handle(JobSubmitted(c1), 5.0)
    [evict] = kernel.handle(PassRequested(), 5.0)
    assert evict.job is a4 and evict.for_job is c1   # the most recent borrower only
    assert kernel.handle(TimerFired(("vc", C.vid)), 6.0) == []
    c2 = Job("c2", "C", 4, 7, 10)   # queued behind c1: the in-flight 4 are c1's, so a3 too
    kernel.handle(JobSubmitted(c2), 7.0)
    assert kernel.handle(PassRequested(), 7.0) == []   # c1 (the head) is covered: nothing more yet
    assert set(quotas.evicting) == {a4}
    kernel.handle(JobEvicted(a4), 8.0)
    # a4 is gone: c1 starts on its GPUs, and c2, heading C's queue now, needs a3's
    bind, evict = kernel.handle(PassRequested(), 8.0)
    assert bind == Bind(c1, ((2, 0xF0),), False)
    assert evict.job is c_jobs[3] and evict.for_job is c2
    kernel.handle(BindSucceeded(c1), 8.0)
    assert kernel.handle(TimerFired(("vc", C.vid)), 9.0) == []
    checked(state, quotas)
    assert quotas.reclaims[C.vid] == 2


def drive(jobs, cluster, policy, queues, overhead: float) -> dict[str, tuple[float, float, int]]:
    """A simulation through Kernel.handle alone (``assume=False``: a Bind or an Evict is already
    carried out; tests/support/kernel_driver.py). Returns job id -> (start, end, preemptions)."""
    state = ClusterState(cluster, new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=False, quotas=QuotaManager(queues, state), rebalance=rebalance)
    kernel.prepare()
    feed(kernel, jobs, overhead)
    return {j.job_id: (j.start_time, j.end_time, j.preemptions) for j in jobs}


@pytest.mark.parametrize("policy", ["fifo", "qssf"])
def test_simulator_and_handle_agree_with_borrowing_and_reclaims(policy: str) -> None:
    vcs = {"a": 4, "b": 2, "c": 2}
    trace = generate(jobs=1500, seed=5, vcs=vcs)
    cluster = ClusterSpec.from_vc_sizes(vcs)
    queues = (QueueSpec("a", 16, 16), QueueSpec("b", 16, 8), QueueSpec("c", 16, 8))
    config = SimConfig(queues=queues, preemption_overhead=lambda job: 30.0)
    result = Simulator(cluster, make_policy(policy), config).run(trace.jobs)
    engine = {j.job_id: (j.start_time, j.end_time, j.preemptions) for j in result.jobs}
    q = result.extra["per_queue"]
    assert sum(r["reclaims"] for r in q.values()) > 10 and sum(r["borrowed_starts"] for r in q.values()) > 100
    fed = drive(trace.jobs, cluster, make_policy(policy), queues, 30.0)
    assert len(fed) == 1500
    assert fed == engine


PER_TYPE = """[defaults]
gpus = 8

[[groups]]
vc = "A"
nodes = 1
gpu = "V100"

[[groups]]
vc = "L"
nodes = 1
gpu = "A100"

[[groups]]
vc = "L"
nodes = 1
gpu = "V100"

[[queues]]
name = "A"
borrow_types = LIMIT

[[queues]]
name = "L"
borrow_limit = 0
"""


@pytest.mark.parametrize("limit,expect", [
    # a1 (4 GPUs) may borrow V100 only. L's placer would take its A100 node (listed first, both
    # 8 free); that node is closed for the question, so a1 borrows L's V100 node at once
    ("{V100 = 4}", {"a1": (1, 11, 2), "a2": (11, 21, 2)}),
    # both types, 4 each: a1 takes A100 (the placer's pick); for a2 A100 has no room left, so
    # it is closed and a2 borrows the V100 node at 2 (the placer would have picked the A100
    # node's other half, refused after the fact)
    ("{A100 = 4, V100 = 4}", {"a1": (1, 11, 1), "a2": (2, 12, 2)}),
])
def test_per_type_limits_are_applied_before_the_placer_picks(tmp_path, limit, expect):
    path = tmp_path / "c.toml"
    path.write_text(PER_TYPE.replace("borrow_types = LIMIT", f"borrow_limit = {limit}"))
    cluster, queues = read_cluster_file(path), read_queues(path)
    log = Starts()
    types = GpuTypes()
    sim = Simulator(cluster, make_policy("fifo", "consolidate"),
                    SimConfig(check_invariants=True, queues=queues), observers=(log, types))
    the_jobs = [Job("a0", "A", 8, 0, 100), Job("a1", "A", 4, 1, 10), Job("a2", "A", 4, 2, 10)]
    res = sim.run(the_jobs)
    t = {j.job_id: (j.start_time, j.end_time) for j in res.jobs}
    where = {job: host for job, _, host in log.rows}
    assert where["a1"] == where["a2"] == "L"
    assert {j: (*t[j], 1 if types.of[j] == "A100" else 2) for j in ("a1", "a2")} == expect


class GpuTypes:
    """A kernel observer: the GPU type each job last ran on (read as it stops, while it still
    holds its placement)."""

    def __init__(self) -> None:
        self.of: dict[str, str] = {}

    def attach(self, state) -> None:
        self.state = state

    def stopped(self, job, vc, now, why) -> None:
        [(node, _)] = job.placement
        self.of[job.job_id] = self.state.node_specs[node].gpu_type.name


def test_as_if_answers_on_the_real_books_and_restores_them_exactly():
    policy = make_policy("fifo", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 2}), new_queue=policy.new_queue)
    vc = state.vcs[0]
    job = Job("j", "A", 4, 0, 10)
    state.submit(job, 0.0)
    state.start(job, ((0, LOW4),), 0.0)

    def books():
        return (list(state.node_free), list(state.node_mask), list(state.node_slot), list(vc.buckets), vc.free,
                vc.busy, state.busy_gpus, [dict(h) for h in state.node_holders])

    before = books()
    assert (state.node_free, vc.free) == ([4, 8], 12)
    with state.as_if(closed=[1], released=[job]):
        # node 1 out of placement, j's 4 GPUs counted free; the holder lists untouched
        assert (state.node_free, state.node_mask, vc.free) == ([8, 0], [0, 0], 8)
        assert state.node_holders[0] == {job: LOW4}
        state.cordon(1)     # the live placer closes nodes kube-scheduler did not offer, then reopens them
        state.uncordon(1)
    assert books() == before
    state.check_invariants()


def test_queues_installed_without_the_rebalance_action_are_refused_not_ignored():
    # the kernel holds the books; the decisions are sched/actions' and must be given to it: without
    # them the queues would silently borrow nothing
    policy = make_policy("fifo", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), new_queue=policy.new_queue)
    with pytest.raises(StateError, match="no rebalance"):
        Kernel(state, policy, assume=True, quotas=QuotaManager(QUEUES, state))
    kernel = Kernel(state, policy, assume=True)
    observers = len(state.observers)
    with pytest.raises(StateError, match="no rebalance"):
        kernel.use_queues(QUEUES, 0.0)
    assert kernel.quotas is None and len(state.observers) == observers   # no manager left behind
    assert kernel.use_queues((QueueSpec("A", borrow_limit=0, lend_limit=0),), 0.0) is None  # none borrows: fine


def test_the_rebalance_action_decides_on_the_kernels_books():
    # A's 8-GPU job borrows B's idle node through sched.actions.rebalance alone: the loan is
    # booked by the kernel's manager (book_loan) on both paths, and check() agrees with what runs
    state, quotas, kernel = live_kernel()
    a1, a2 = Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 0, 100)
    kernel.handle(JobSubmitted(a1), 0.0)
    kernel.handle(JobSubmitted(a2), 0.0)
    actions = kernel.handle(PassRequested(), 0.0)
    binds = {a.job.job_id: state.node_vc[a.placement[0][0]] for a in actions if isinstance(a, Bind)}
    assert binds == {"a1": 0, "a2": 1}          # a2 on B's node (B lends at most 4: exactly a2)
    assert quotas.borrowed == [4, 0, 0] and quotas.lent == [0, 4, 0] and quotas.borrow_starts == [1, 0, 0]
    checked(state, quotas)


def test_a_change_of_queues_is_a_stimulus_through_the_handler_table():
    # QueuesChanged(specs) builds the manager on the state as it stands (Kernel.on_queues); specs
    # that do not fit (a VC named as a parent) are not enforced and the kernel says why; () ends it
    policy = make_policy("fifo", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=True, rebalance=rebalance)
    assert kernel.handle(QueuesChanged(QUEUES), 0.0) == []
    assert kernel.quotas is not None and kernel.queues_refused == ""
    a1, a2 = Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 0, 100)
    kernel.handle(JobSubmitted(a1), 0.0)
    kernel.handle(JobSubmitted(a2), 0.0)
    binds = [a for a in kernel.handle(PassRequested(), 0.0) if isinstance(a, Bind)]
    assert [(b.job.job_id, state.node_vc[b.placement[0][0]]) for b in binds] == [("a1", 0), ("a2", 1)]
    bad = (QueueSpec("A", borrow_limit=8, lend_limit=None, parent="B"), QueueSpec("B"),
           QueueSpec("C", borrow_limit=0, lend_limit=None, parent="B"))
    kernel.handle(QueuesChanged(bad), 1.0)
    assert kernel.quotas is None and "named as a parent" in kernel.queues_refused
    kernel.handle(QueuesChanged(QUEUES), 2.0)   # the loan of a2 is booked again by the new manager
    assert kernel.queues_refused == "" and kernel.quotas.borrowed == [4, 0, 0]
    kernel.handle(QueuesChanged(()), 3.0)
    assert kernel.quotas is None and kernel.queues_refused == ""
