"""Fair share over time-decayed usage per user: a hand-checked 2-user example."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sched.policies.fairshare import FairShareParams
from dlsched.sim import SimConfig, Simulator


def jobs():
    return [Job("x1", "v", 8, 0, 100, user="alice"), Job("y1", "v", 8, 0, 50, user="bob"),
            Job("x2", "v", 8, 10, 10, user="alice"), Job("y2", "v", 8, 20, 10, user="bob")]


def run(half_life: float):
    policy = make_policy("fairshare", "consolidate", half_life=half_life)
    res = Simulator(ClusterSpec.from_vc_sizes({"v": 1}), policy, SimConfig(check_invariants=True)).run(jobs())
    return policy, {j.job_id: (j.start_time, j.end_time) for j in res.jobs}


def test_decayed_usage_orders_users():
    # at 100 alice has used 800 GPU-s, bob nothing: bob's y1 first (100-150). At 150 bob has 400;
    # alice's 800 has decayed for 50 s: with a 100 s half-life to 566 (> 400: bob's y2 first),
    # with a 25 s half-life to 200 (< 400: alice's x2 first).
    policy, t = run(100.0)
    assert t == {"x1": (0, 100), "y1": (100, 150), "y2": (150, 160), "x2": (160, 170)}
    # after the run (170): each job's GPU-seconds, decayed since it ended
    assert policy.usage("alice", 170.0) == pytest.approx(800 * 2 ** -0.7 + 80)
    assert policy.usage("bob", 170.0) == pytest.approx(400 * 2 ** -0.5 * 2 ** 0.3 + 80 * 2 ** -0.1)
    policy, t = run(25.0)
    assert t == {"x1": (0, 100), "y1": (100, 150), "x2": (150, 160), "y2": (160, 170)}
    assert policy.usage("alice", 170.0) == pytest.approx(800 * 2 ** -(70 / 25) + 80 * 2 ** -(10 / 25))
    assert policy.usage("bob", 170.0) == pytest.approx(400 * 2 ** -(20 / 25) + 80)


def test_weights_stay_finite_over_many_half_lives():
    policy = make_policy("fairshare", None, half_life=1.0)
    policy.prepare(type("V", (), {"now": 0.0})())
    done = Job("a", "v", 2, 0, 10, user="u")
    done.queue_delay = 0.0
    policy.job_finished(done, 10_000.0)  # 10,000 half-lives after t0
    assert policy.usage("u", 10_000.0) == pytest.approx(2 * 10_000.0)
    assert policy.usage("u", 10_001.0) == pytest.approx(10_000.0)


def test_params_are_checked():
    with pytest.raises(ValueError, match="half_life"):
        FairShareParams(0.0)
