"""Preemption guards (sched/preemption.py) on SRTF and PAB, and the Preempt decision's log fields."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.decisions import Preempt
from dlsched.registry import make_policy
from dlsched.run.config import OptionError
from dlsched.run.params import make_params
from dlsched.sched.preemption import EvictionGuard
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import helios_checkpoint_overhead


def record(policy) -> list:
    """Wrap the policy's pass so every decision it yields is kept."""
    seen, schedule = [], policy.schedule

    def recording(view, vc):
        for decision in schedule(view, vc):
            seen.append(decision)
            yield decision

    policy.schedule = recording
    return seen


def srtf_run(jobs, **params):
    policy = make_policy("srtf", **params)
    decisions = record(policy)
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=4), policy,
                    SimConfig(check_invariants=True, preemption_overhead=lambda job: 10.0))
    result = sim.run(jobs)
    return result, {j.job_id: j for j in result.jobs}, decisions


def two_jobs():
    return [Job("long", "v", 4, 0.0, 1000.0), Job("short", "v", 4, 100.0, 50.0)]


def test_preempt_is_backward_compatible_and_carries_why_and_for_whom():
    job, other = Job("a", "v", 1, 0.0, 1.0), Job("b", "v", 1, 0.0, 1.0)
    assert Preempt(job) == (job, "", None)
    assert Preempt(job, "why", other).for_job is other


def test_srtf_eviction_says_who_it_was_for_and_why():
    result, jobs, decisions = srtf_run(two_jobs())
    evictions = [d for d in decisions if isinstance(d, Preempt)]
    assert len(evictions) == 1
    ev = evictions[0]
    assert ev.job.job_id == "long" and ev.for_job.job_id == "short"
    assert ev.reason == "srtf: 900 s remaining ranks outside VC v's 4 GPUs"
    # long: 0-100, evicted (900 s left + 10 s overhead), restarts at 150 -> 1060
    assert (jobs["short"].start_time, jobs["long"].end_time) == (100.0, 1060.0)
    assert result.extra == {**result.extra, "evictions": 1, "evictions_refused_min_run": 0,
                            "evictions_refused_cap": 0}


def test_srtf_min_run_defers_the_eviction_to_the_end_of_the_protection():
    result, jobs, _ = srtf_run(two_jobs(), min_run_s=300.0)
    # refused at 100 (ran 100 s < 300), woken at 300: evicted with 700 s left -> restarts 350, ends 1060
    assert (jobs["short"].start_time, jobs["short"].end_time) == (300.0, 350.0)
    assert (jobs["long"].end_time, jobs["long"].preemptions) == (1060.0, 1)
    assert result.extra["evictions_refused_min_run"] == 1 and result.extra["evictions"] == 1


def test_srtf_cap_counts_the_kernels_evictions():
    # three shorter arrivals: with max_evictions=1 long is evicted once, then keeps running
    jobs = [Job("long", "v", 4, 0.0, 1000.0), Job("s1", "v", 4, 100.0, 50.0),
            Job("s2", "v", 4, 300.0, 50.0), Job("s3", "v", 4, 400.0, 50.0)]
    result, out, _ = srtf_run(jobs, max_evictions=1)
    assert out["long"].preemptions == 1
    assert result.extra["evictions"] == 1 and result.extra["evictions_refused_cap"] == 1
    # long restarts at 150 with 910 s left, refused at 300, ends at 1060; s2, s3 follow
    assert out["long"].end_time == 1060.0 and out["s2"].start_time == 1060.0
    result, out, _ = srtf_run(jobs)  # no cap: long is evicted by every short job
    assert out["long"].preemptions == 3 and result.extra["evictions"] == 3


def test_default_guards_change_nothing():
    guard = EvictionGuard()
    assert not guard.active and guard.overhead(helios_checkpoint_overhead) is helios_checkpoint_overhead
    job = Job("j", "v", 16, 0.0, 1.0)
    assert EvictionGuard(grace_s=45.0).overhead(helios_checkpoint_overhead)(job) == 60.0  # 60 s > 45 s
    assert EvictionGuard(grace_s=90.0).overhead(helios_checkpoint_overhead)(job) == 90.0
    assert EvictionGuard(grace_s=5.0).overhead(None)(job) == 5.0


@pytest.mark.parametrize("policy", ["srtf", "pab", "srtf-pred"])
def test_guards_are_policy_parameters(policy):
    params, unknown = make_params(policy, {"min_run_s": "600", "max_evictions": "2", "grace_s": "30"})
    assert (params.min_run_s, params.max_evictions, params.grace_s, unknown) == (600.0, 2, 30.0, [])
    assert make_params(policy, {"max_evictions": "none"})[0].max_evictions is None
    with pytest.raises(OptionError, match="min_run_s must be a finite number >= 0 seconds, got -1"):
        make_params(policy, {"min_run_s": "-1"})
    with pytest.raises(OptionError, match="max_evictions must be >= 0"):
        make_params(policy, {"max_evictions": "-3"})


# -- PAB: its one check per shared start honours the guards ----------------------------------
def pab_run(**params):
    from tests.support.sharing import cluster, job

    policy = make_policy("pab", share=True, warmup=20, max_drop=0.3, t_wait=0, **params)
    jobs = [job("a", 40, 3000, duration=1000.0), job("b", 40, 3000, duration=1000.0)]
    sim = Simulator(cluster(1, 1), policy, SimConfig(max_jobs_per_gpu=2, check_invariants=True,
                                                     preemption_overhead=lambda j: 0.0),
                    speed_model=make_speed("time-sliced"))
    result = sim.run(jobs)
    return result, {j.job_id: j for j in result.jobs}


def make_speed(name):
    from dlsched.registry import make_speed_model

    return make_speed_model(name, ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1))


def test_pab_requeues_at_the_warmup_without_guards():
    result, jobs = pab_run()
    # both share the one GPU at half speed; at 20 s the check re-queues b (its rate 0.5 < 0.7)
    assert jobs["b"].preemptions == 1 and result.extra["evictions"] == 1
    # a: 10 s of work by 20 s, then alone -> 1010; b restarts then with 990 s left -> 2000
    assert (jobs["a"].end_time, jobs["b"].start_time, jobs["b"].end_time) == (1010.0, 0.0, 2000.0)


def test_pab_min_run_moves_the_check_and_the_cap_keeps_the_job():
    result, jobs = pab_run(min_run_s=100.0)
    # checked at 20 s: protected until 100 s, checked again then and re-queued
    assert jobs["b"].preemptions == 1
    assert result.extra["evictions"] == 1 and result.extra["evictions_refused_min_run"] == 1
    # both at half speed until 100 s (50 s done each): a alone -> 1050, b restarts then -> 2000
    assert (jobs["a"].end_time, jobs["b"].end_time) == (1050.0, 2000.0)
    result, jobs = pab_run(max_evictions=0)
    assert jobs["b"].preemptions == 0 and result.extra["evictions_refused_cap"] == 1
