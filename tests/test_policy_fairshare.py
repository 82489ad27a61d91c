"""Fair share over time-decayed usage per user: a hand-checked 2-user example."""

from __future__ import annotations

import math

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


def seg(gpus: float, start: float, end: float, t: float, half: float) -> float:
    """Decayed usage at ``t`` of ``gpus`` GPUs run over [start, end] (the integral of
    gpus x 2^-((t - s) / half) ds)."""
    return gpus * half / math.log(2) * (2 ** (-(t - end) / half) - 2 ** (-(t - start) / half))


def test_decayed_usage_orders_users():
    # at 100 alice has used x1's 8 GPUs over 0-100, bob nothing: bob's y1 first (100-150). At 150
    # bob's y1 counts 8 x 100/ln 2 x (1 - 2^-0.5) = 338.0; alice's x1 has decayed for 50 s more:
    # with a 100 s half-life 8 x 144.27 x (2^-0.5 - 2^-1.5) = 408.0 (> 338: bob's y2 first), with a
    # 25 s half-life 8 x 36.07 x (2^-2 - 2^-6) = 67.6 (< 8 x 36.07 x 0.75 = 216.4: alice's x2 first).
    policy, t = run(100.0)
    assert t == {"x1": (0, 100), "y1": (100, 150), "y2": (150, 160), "x2": (160, 170)}
    assert seg(8, 0, 100, 150, 100.0) == pytest.approx(408.0, abs=0.1)
    assert seg(8, 100, 150, 150, 100.0) == pytest.approx(338.0, abs=0.1)
    # after the run (170): each run segment, decayed while and since it ran
    assert policy.usage("alice", 170.0) == pytest.approx(seg(8, 0, 100, 170, 100.0) + seg(8, 160, 170, 170, 100.0))
    assert policy.usage("bob", 170.0) == pytest.approx(seg(8, 100, 150, 170, 100.0) + seg(8, 150, 160, 170, 100.0))
    policy, t = run(25.0)
    assert t == {"x1": (0, 100), "y1": (100, 150), "x2": (150, 160), "y2": (160, 170)}
    assert seg(8, 0, 100, 150, 25.0) == pytest.approx(67.6, abs=0.1)
    assert seg(8, 100, 150, 150, 25.0) == pytest.approx(216.4, abs=0.1)
    assert policy.usage("alice", 170.0) == pytest.approx(seg(8, 0, 100, 170, 25.0) + seg(8, 150, 160, 170, 25.0))
    assert policy.usage("bob", 170.0) == pytest.approx(seg(8, 100, 150, 170, 25.0) + seg(8, 160, 170, 170, 25.0))


def test_usage_stays_finite_over_many_half_lives():
    # a job running for 10,000 half-lives saturates at gpus x half_life / ln 2; one that ended then
    # decays to 0, never to an overflow or NaN
    policy = make_policy("fairshare", None, half_life=1.0)
    policy.prepare(type("V", (), {"now": 0.0})())
    running = Job("a", "v", 2, 0, 1e9, user="u")
    policy.tracker.started(running, None, 0.0)
    assert policy.usage("u", 10_000.0) == pytest.approx(2 / math.log(2))
    policy.tracker.stopped(running, None, 10_000.0, "finish")
    assert policy.usage("u", 20_000.0) == 0.0 and policy.usage("nobody", 20_000.0) == 0.0


def test_params_are_checked():
    with pytest.raises(ValueError, match="half_life"):
        FairShareParams(0.0)


@pytest.mark.parametrize("half_life", [1e20, 1e308])
def test_huge_half_lives_count_usage_undecayed(half_life):
    # (1 - 2^(-dt/h)) * h / ln 2 cancelled to 0 from h ~ 1e17 (at 1e308 the policy was FIFO: x2,
    # submitted first, before y2); computed with expm1, usage is the plain GPU-seconds: at 150
    # alice has 800, bob 400, so bob's y2 goes first
    policy, t = run(half_life)
    assert t == {"x1": (0, 100), "y1": (100, 150), "y2": (150, 160), "x2": (160, 170)}
    assert policy.usage("alice", 170.0) == pytest.approx(8 * 100 + 8 * 10, rel=1e-12)
    assert policy.usage("bob", 170.0) == pytest.approx(8 * 50 + 8 * 10, rel=1e-12)
