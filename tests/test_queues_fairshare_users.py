"""Decayed fair share per user (the ``fairshare`` ordering policy): a 2-user example whose usage
is checked by hand at two times one half-life apart, and the order it gives."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator

HALF = 100.0


def run():
    # one 8-GPU VC: alice runs 4 GPUs over 0-120 (480 GPU-s), bob 4 GPUs over 0-40 (160 GPU-s);
    # at 200 both submit an 8-GPU job
    jobs = [Job("a0", "v", 4, 0, 120, user="alice"), Job("b0", "v", 4, 0, 40, user="bob"),
            Job("a1", "v", 8, 200, 10, user="alice"), Job("b1", "v", 8, 200, 10, user="bob")]
    policy = make_policy("fairshare", "consolidate", half_life=HALF)
    res = Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy, SimConfig(check_invariants=True)).run(jobs)
    return policy, {j.job_id: (j.start_time, j.end_time) for j in res.jobs}


def test_two_users_usage_by_hand_across_one_half_life():
    policy, t = run()
    # b0 ends at 40 (160 GPU-s booked then), a0 at 120 (480). At 200 alice has 480 x 2^-0.8 =
    # 275.7, bob 160 x 2^-1.6 = 52.8: bob's b1 first (200-210), then alice's a1 (210-220)
    assert t["b0"] == (0, 40) and t["a0"] == (0, 120)
    assert t["b1"] == (200, 210) and t["a1"] == (210, 220)
    # at 220, the end: alice 480 x 2^-1 + 80 = 320; bob 160 x 2^-1.8 + 80 x 2^-0.1 = 120.59
    assert policy.usage("alice", 220.0) == pytest.approx(320.0)
    assert policy.usage("bob", 220.0) == pytest.approx(160 * 2 ** -1.8 + 80 * 2 ** -0.1)
    assert policy.usage("bob", 220.0) == pytest.approx(120.59, abs=0.01)
    # one half-life later (320) each has halved: 160 and 60.30
    assert policy.usage("alice", 320.0) == pytest.approx(160.0)
    assert policy.usage("bob", 320.0) == pytest.approx(60.30, abs=0.01)
