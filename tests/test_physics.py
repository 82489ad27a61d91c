"""Simulator physics lives in the simulated backend (sim/physics.py), not in the kernel.

The kernel's ClusterState books occupancy and the run record only: it has no speed, failure or
remaining-time attribute or method, and its source writes no truth slot of a job. The physics
rates and re-rates jobs, books work on a stop and arms failures, after each kernel transition.
"""

from __future__ import annotations

import inspect
import re

import pytest

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job, JobState
from dlsched.kernel.decide import apply as apply_decision
from dlsched.kernel.decisions import Preempt, Start
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.models.failure import OutOfMemory
from dlsched.models.speed import TimeSlicedSpeed
from dlsched.sim.physics import Physics

PHYSICS_WORDS = re.compile(r"speed|failure|remaining|settle|overhead|true_mem|modelled|rerate|respeed")


def shared_gpu(cap: int = 2) -> ClusterState:
    spec = ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=2, gpu_type=GpuType("T", 10_000))
    return ClusterState(spec, new_queue=ArrivalQueue, max_jobs_per_gpu=cap)


def test_cluster_state_has_no_physics_attribute_or_method():
    state = shared_gpu()
    names = set(dir(ClusterState)) | set(vars(state))
    assert sorted(n for n in names if PHYSICS_WORDS.search(n)) == []
    params = inspect.signature(ClusterState).parameters
    assert sorted(p for p in params if PHYSICS_WORDS.search(p)) == []


def test_the_kernel_source_writes_no_truth_slot_of_a_job():
    import dlsched.kernel.state as kernel_state

    source = inspect.getsource(kernel_state)
    writes = re.findall(r"\b\w+\.(_remaining|_start_remaining|speed)\s*[-+*/]?=(?!=)", source)
    assert writes == []


def test_transitions_return_the_vc_and_move_no_finish():
    state = shared_gpu()
    vc = state.vcs[0]
    a, b = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 0, 100)
    for j in (a, b):
        assert state.submit(j, 0.0) is vc
    assert state.start(a, ((0, 0b01),), 0.0) is vc
    assert state.start(b, ((0, 0b01),), 0.0, shared=True) is vc
    assert state.preempt(b, 10.0) is vc and b.speed == 1.0 and b._remaining == 100.0
    assert state.finish(a, 20.0) is vc and a._remaining == 100.0  # truth is not the kernel's


def test_the_physics_rates_re_rates_and_settles_exactly():
    state = shared_gpu()
    physics = Physics(state, TimeSlicedSpeed(), preemption_overhead=lambda job: 5.0)
    a, b, c = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 0, 60), Job("c", "v", 1, 0, 10)
    for j in (a, b, c):
        state.submit(j, 0.0)
    assert apply_decision(state, Start(a, ((0, 0b01),)), 0.0, physics) == [a]
    assert a.speed == 1.0
    # b joins a's GPU at t=20: both run at half speed; a's 20 s of work are booked
    assert apply_decision(state, Start(b, ((0, 0b01),), True), 20.0, physics) == [b, a]
    assert (a.speed, b.speed, a._remaining, a.run_since) == (0.5, 0.5, 80.0, 20.0)
    assert physics.remaining(a, 40.0) == 70.0 and physics.remaining(b, 40.0) == 50.0
    # c on the other GPU moves nobody
    assert apply_decision(state, Start(c, ((0, 0b10),)), 20.0, physics) == [c]
    # b is preempted at t=60: 20 s of its work booked, 5 s overhead; a back to full speed
    epoch = a.epoch
    assert apply_decision(state, Preempt(b), 60.0, physics) == [a]
    assert b._remaining == pytest.approx(60.0 - 20.0 + 5.0) and b.speed == 1.0
    assert a.speed == 1.0 and a._remaining == 60.0 and a.epoch == epoch + 1
    # c finishes: its GPU held nobody else
    state.finish(c, 70.0)
    assert list(physics.finished(c, 70.0)) == [] and physics.remaining(c, 71.0) == 0.0
    assert c.state is JobState.FINISHED


def test_a_finish_re_rates_co_runners_from_the_placement_recorded_at_the_start():
    state = shared_gpu()
    physics = Physics(state, TimeSlicedSpeed())
    a, b = Job("a", "v", 1, 0, 100), Job("b", "v", 1, 0, 10)
    for j in (a, b):
        state.submit(j, 0.0)
    apply_decision(state, Start(a, ((0, 0b01),)), 0.0, physics)
    apply_decision(state, Start(b, ((0, 0b01),), True), 0.0, physics)
    state.finish(b, 20.0)  # the kernel clears b's placement
    assert b.placement is None
    assert physics.finished(b, 20.0) == [a]
    assert a.speed == 1.0 and a._remaining == 90.0 and physics.placed.keys() == {a}


def test_a_crash_loses_the_progress_and_the_failure_model_arms_it_through_the_physics():
    state = shared_gpu()
    physics = Physics(state, failure_model=OutOfMemory(delay=10))
    a = Job("a", "v", 1, 0, 100, gpu_mem_mib=6_000)
    b = Job("b", "v", 1, 0, 100, gpu_mem_mib=6_000)
    for j in (a, b):
        state.submit(j, 0.0)
    apply_decision(state, Start(a, ((0, 0b01),)), 0.0, physics)
    apply_decision(state, Start(b, ((0, 0b01),), True), 5.0, physics)
    assert physics.gpu_true_mem(0, 0) == 12_000
    (due, job, reason), = physics.failures_due
    assert (due, job) == (15.0, b) and reason.startswith("out of memory")
    physics.failing(b, due, reason)
    state.fail(b, due, reason)
    assert list(physics.failed(b, due)) == [] and b._remaining == 100.0 and b.failures == 1


def test_the_engine_hands_only_an_oracle_s_view_the_physics():
    from dlsched.registry import make_policy
    from dlsched.sim import SimConfig, Simulator

    spec = ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1)
    plain = Simulator(spec, make_policy("fifo"), SimConfig())
    plain.run([Job("a", "v", 1, 0, 5)])
    assert plain.view.truth is None and plain.physics.plain
    oracle = Simulator(spec, make_policy("srtf"), SimConfig())
    oracle.run([Job("a", "v", 1, 0, 5)])
    assert oracle.view.truth is oracle.physics
