"""Decayed fair share per user (the ``fairshare`` ordering policy): a 2-user example whose usage
is checked by hand at two times one half-life apart while a long job still runs, and the order
that running usage gives (booked only at a job's end, it would give the other one)."""

from __future__ import annotations

import math

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator

HALF = 100.0
K = HALF / math.log(2)   # GPU-seconds a GPU that runs forever adds up to


def seg(gpus: float, start: float, end: float, t: float) -> float:
    """Decayed usage at ``t`` of ``gpus`` GPUs run over [start, end]: the integral of
    gpus x 2^-((t - s) / HALF) ds."""
    return gpus * K * (2 ** (-(t - end) / HALF) - 2 ** (-(t - start) / HALF))


class UsageAt:
    """Reads the policy's usage at given times during the run (a clock callback sees the state as
    it was up to that time, before that instant's transitions)."""

    def __init__(self, policy, times):
        self.policy, self.times, self.seen = policy, list(times), {}

    def attach(self, state):
        state.add_clock(self.tick)

    def tick(self, now):
        while self.times and self.times[0] <= now:
            t = self.times.pop(0)
            self.seen[t] = {u: self.policy.usage(u, t) for u in ("alice", "bob")}
        return self.times[0] if self.times else math.inf


def run():
    # one 8-GPU VC. alice's a0 holds 6 GPUs from 0 to 1000 (still running throughout), bob's b0 2 GPUs
    # over 0-50; the node is full. alice's a1 (2 GPUs) arrives at 10, bob's b1 (2 GPUs) at 20.
    jobs = [Job("a0", "v", 6, 0, 1000, user="alice"), Job("b0", "v", 2, 0, 50, user="bob"),
            Job("a1", "v", 2, 10, 100, user="alice"), Job("b1", "v", 2, 20, 100, user="bob")]
    policy = make_policy("fairshare", "consolidate", half_life=HALF)
    probe = UsageAt(policy, [50.0, 150.0])
    res = Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy, SimConfig(check_invariants=True),
                    observers=(probe,)).run(jobs)
    return policy, probe.seen, {j.job_id: (j.start_time, j.end_time) for j in res.jobs}


def test_two_users_usage_by_hand_while_a_long_job_runs():
    policy, seen, t = run()
    # at 50 (b0 ends, 2 GPUs free): alice's running a0 has accrued 6 K (1 - 2^-0.5) = 253.53,
    # bob's finished b0 2 K (1 - 2^-0.5) = 84.51. Bob's b1 goes first (50-150) although alice has
    # finished nothing: booked only at a job's end, alice would be at 0 and her a1 would go first.
    assert seen[50.0]["alice"] == pytest.approx(6 * K * (1 - 2 ** -0.5)) == pytest.approx(253.53, abs=0.01)
    assert seen[50.0]["bob"] == pytest.approx(2 * K * (1 - 2 ** -0.5)) == pytest.approx(84.51, abs=0.01)
    assert t["b1"] == (50, 150) and t["a1"] == (150, 250) and t["a0"] == (0, 1000)
    # one half-life later (150, b1 ends): each value halved, plus what ran meanwhile. alice: 253.53 / 2
    # + 6 K (1 - 2^-1) = 126.77 + 432.81 = 559.57 (a0 still running); bob: 84.51 / 2 + b1's 2 GPUs
    # over 50-150, 2 K / 2 = 42.26 + 144.27 = 186.53
    assert seen[150.0]["alice"] == pytest.approx(seen[50.0]["alice"] / 2 + 6 * K / 2) == \
        pytest.approx(559.57, abs=0.01)
    assert seen[150.0]["bob"] == pytest.approx(seen[50.0]["bob"] / 2 + 2 * K / 2) == pytest.approx(186.53, abs=0.01)
    # the same numbers as the closed form per run segment
    assert seen[150.0]["alice"] == pytest.approx(seg(6, 0, 150, 150))
    assert seen[150.0]["bob"] == pytest.approx(seg(2, 0, 50, 150) + seg(2, 50, 150, 150))
    # at the end (1000): every segment decayed since it ran
    assert policy.usage("alice", 1000.0) == pytest.approx(seg(6, 0, 1000, 1000) + seg(2, 150, 250, 1000))
    assert policy.usage("bob", 1000.0) == pytest.approx(seg(2, 0, 50, 1000) + seg(2, 50, 150, 1000))


def test_a_preempted_run_counts_up_to_its_stop():
    # the usage observer sees every stop: a job preempted (here by hand through the kernel) stops
    # accruing then, and accrues again from its restart
    from dlsched.kernel.state import ClusterState

    policy = make_policy("fairshare", "consolidate", half_life=HALF)
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}), new_queue=policy.new_queue)
    state.add_observer(policy.tracker)
    j = Job("a", "v", 4, 0, 500, user="alice")
    state.submit(j, 0.0)
    state.start(j, ((0, 0b1111),), 0.0)
    state.preempt(j, 30.0)
    state.start(j, ((0, 0b1111),), 80.0)
    assert policy.usage("alice", 100.0) == pytest.approx(seg(4, 0, 30, 100) + seg(4, 80, 100, 100))


def test_eta_forward_copy_carries_the_usage_and_is_exact():
    # the start-time estimate at 30: the forward copy's fair share starts from each user's usage at
    # 30 (alice's running a0 included) and lets its twins accrue as they run: b1 at 50, a1 at 150,
    # the actual starts. The real policy's usage is untouched by the forward run.
    from dlsched.experiments.dlsched.eta import EtaSampler
    from dlsched.sim.eta import EtaEstimator

    jobs = [Job("a0", "v", 6, 0, 1000, user="alice"), Job("b0", "v", 2, 0, 50, user="bob"),
            Job("a1", "v", 2, 10, 100, user="alice"), Job("b1", "v", 2, 20, 100, user="bob")]
    for j in jobs:
        j.pred_duration = j._duration
    policy = make_policy("fairshare", "consolidate", half_life=HALF)
    sampler = EtaSampler(EtaEstimator(policy), [30.0])
    probe = UsageAt(policy, [30.0, 40.0])
    Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy, SimConfig(check_invariants=True),
              observers=(sampler, probe)).run(jobs)
    assert {s.job.job_id: s.eta for s in sampler.samples} == {"b1": 50.0, "a1": 150.0}
    assert all(s.eta == s.job.start_time for s in sampler.samples)
    assert probe.seen[40.0]["alice"] == pytest.approx(seg(6, 0, 40, 40))   # not the forward run's future
