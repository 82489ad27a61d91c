"""Start-time estimates with queues that borrow: the forward copy runs the queue manager as the
simulator does, so a job that will start on borrowed GPUs gets that start, not the fixed VCs' one.
The 3-VC example of tests/test_queues_quotas.py, hand-checked, with perfect predictions."""

from __future__ import annotations

import math

import pytest
from support.starts import Starts

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.experiments.dlsched.eta import EtaSampler
from dlsched.kernel.quotas import QueueSpec
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.eta import EtaEstimator, quota_manager_of

# A may borrow 8 GPUs; B lends at most 4; C lends without a limit; one 8-GPU node each
QUEUES = (QueueSpec("A", borrow_limit=8, lend_limit=None), QueueSpec("B", borrow_limit=0, lend_limit=4),
          QueueSpec("C", borrow_limit=0, lend_limit=None))
OVERHEAD = 10.0


def jobs() -> list[Job]:
    out = [Job("a1", "A", 8, 0, 100), Job("a2", "A", 4, 1, 50), Job("a3", "A", 4, 2, 50),
           Job("a4", "A", 2, 3, 10), Job("c1", "C", 8, 10, 20)]
    for j in out:
        j.pred_duration = j._duration   # perfect predictions
    return out


def run(times, sim_queues=QUEUES, **estimator):
    """The simulator with ``queues``; ETAs sampled at ``times`` by an estimator told the run's
    checkpoint overhead. Returns the sampler and where each (re)start ran."""
    policy = make_policy("fifo", "consolidate")
    log = Starts()
    sampler = EtaSampler(EtaEstimator(policy, preemption_overhead=lambda job: OVERHEAD, **estimator), times)
    sim = Simulator(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), policy,
                    SimConfig(check_invariants=True, preemption_overhead=lambda job: OVERHEAD, queues=sim_queues),
                    observers=(log, sampler))
    sim.run(jobs())
    return sampler, log.rows


def etas(sampler, at: float) -> dict[str, float]:
    return {s.job.job_id: s.eta for s in sampler.samples if s.at == at}


def test_eta_with_borrowing_equals_the_actual_starts():
    sampler, starts = run([5.0, 15.0])
    # the run (tests/test_queues_quotas.py): a1 at 0 on A; a2 borrows B at 1 (B's lend limit 4
    # reached), a3 borrows C at 2; a4 (2 GPUs) waits: A's borrow limit of 8 is used up. c1 arrives
    # at 10: C reclaims a3 (8 s done, 42 left + 10 s checkpoint); a3 borrows C again when c1 ends at
    # 30; a4 borrows B at 51 when a2 ends (B lends 2 of its 4, A has 4 + 2 out).
    assert starts == [("a1", 0, "A"), ("a2", 1, "B"), ("a3", 2, "C"), ("c1", 10, "C"), ("a3", 30, "C"),
                      ("a4", 51, "B")]
    # at 5 (a2 and a3 run on borrowed GPUs: the copy carries their loans), a4 waits: it borrows B at
    # 51, as it does. Fixed VCs would say 100 (a1's end): see the next test.
    assert etas(sampler, 5.0) == {"a4": 51.0}
    # at 15, after the reclaim: a3 waits again (restart 30 on C, when c1 ends), a4 still 51
    assert etas(sampler, 15.0) == {"a3": 30.0, "a4": 51.0}
    restarts = {job: t for job, t, _ in starts}
    for s in sampler.samples:
        assert s.eta == restarts[s.job.job_id]


def test_without_the_manager_in_the_copy_the_eta_is_the_fixed_vcs_one():
    # the same run, the copy told to run fixed VCs (queues=()): the loans a2 and a3 hold are kept
    # (they run on until they end), but nothing borrows: a4 waits for a1's node, 100 instead of 51
    sampler, _ = run([5.0], queues=())
    assert etas(sampler, 5.0) == {"a4": 100.0}


def test_the_copy_takes_the_state_managers_queues_and_usage():
    # a copy at 5 has the manager's tree, half-life and each queue's decayed usage at 5 (A: a1 8
    # GPUs over 0-5, a2 and a3 4 each over 1-5 and 2-5), and leaves the real manager untouched
    policy = make_policy("fifo", "consolidate")
    seen = {}

    class Probe:
        def attach(self, state):
            self.state = state
            state.add_clock(self.tick)

        def tick(self, now):
            if now < 5.0:
                return 5.0
            if "run" not in seen:
                real = quota_manager_of(self.state)
                before = {q: u.at(5.0) for q, u in real.usage.items()}
                fwd = EtaEstimator(policy).snapshot(self.state, 5.0)
                copied = fwd.quotas
                seen.update(copy_usage=copied.usage["A"].at(5.0), copy_rate=copied.usage["A"].rate,
                            copy_loans=(copied.out_total["A"], copied.in_total["B"], copied.in_total["C"]))
                copied.check()
                seen.update(run=fwd, real=real, before=before, eta=fwd.run().by_id(),
                            after={q: u.at(5.0) for q, u in real.usage.items()}, loans=list(real.borrowed))
            return math.inf

    Simulator(ClusterSpec.from_vc_sizes({"A": 1, "B": 1, "C": 1}), policy,
              SimConfig(preemption_overhead=lambda job: OVERHEAD, queues=QUEUES), observers=(Probe(),)).run(jobs())
    copy, real = seen["run"].quotas, seen["real"]
    assert copy is not real and copy.half_life == real.half_life == 7 * 86400.0
    assert set(copy.tree.specs) == set(real.tree.specs)
    half = 7 * 86400.0
    exact = sum(g * half / math.log(2) * (2 ** -((5 - t1) / half) - 2 ** -((5 - t0) / half))
                for g, t0, t1 in ((8, 0, 5), (4, 1, 5), (4, 2, 5)))
    assert seen["copy_usage"] == pytest.approx(exact, rel=1e-8)     # 68.0 GPU-s: 5 s decay barely shows
    assert seen["copy_usage"] == pytest.approx(seen["before"]["A"], rel=1e-12)
    assert seen["copy_rate"] == 16                  # a1, a2 and a3 run on in the copy
    assert seen["copy_loans"] == (8, 4, 4)          # the two loans, booked where the manager books them
    assert copy.borrow_starts == [1, 0, 0]          # then a4 borrowed in the forward run
    assert seen["eta"] == {"a4": 51.0}
    # the forward run moved nothing of the real manager
    assert seen["after"] == seen["before"] and seen["loans"] == [8, 0, 0]


def test_a_what_if_that_borrows_needs_a_non_preemptive_policy():
    from dlsched.kernel.state import ClusterState

    policy = make_policy("srtf", "consolidate")
    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1}), new_queue=policy.new_queue)
    state.submit(Job("a", "A", 8, 0, 10), 0.0)
    with pytest.raises(ValueError, match="non-preemptive ordering policy; srtf preempts"):
        EtaEstimator(policy, queues=(QueueSpec("A", borrow_limit=8), QueueSpec("B", borrow_limit=0))).estimate(state, 0.0)
