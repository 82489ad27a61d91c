"""Kernel transitions beyond start/finish: assume/confirm/forget, fail, nodes, the job index, apply()."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel import ClusterState, Postpone, Preempt, Start, StateError
from dlsched.kernel.decide import apply as apply_decision
from dlsched.kernel.queues import ArrivalQueue
from dlsched.sim.physics import Physics


def make_state(nodes: int = 2, gpus: int = 4, **kw) -> ClusterState:
    return ClusterState(ClusterSpec.from_vc_sizes({"v": nodes}, gpus_per_node=gpus), new_queue=ArrivalQueue, **kw)


def test_forget_after_a_failed_bind_restores_everything():
    state = make_state()
    vc = state.vcs[0]
    job = Job("j", "v", 2, 0.0, 50.0)
    state.submit(job, 0.0)
    state.start(job, ((0, 0b0011),), 5.0, confirm=False)  # assumed: resources held, not yet bound
    assert job.state is JobState.ASSUMED and state.node_free[0] == 2 and vc.pending == 0
    state.check_invariants()
    state.forget(job, 7.0)  # the bind failed
    assert job.state is JobState.PENDING and job.start_time == -1.0 and job.queue_delay == 0.0
    assert state.node_free[0] == 4 and state.node_mask[0] == 0 and vc.pending == 1 and vc.free == 8
    state.check_invariants()
    state.start(job, ((1, 0b1100),), 9.0, confirm=False)
    state.confirm(job, 9.5)
    assert job.state is JobState.RUNNING and job.start_time == 9.0 and job.queue_delay == 9.0
    with pytest.raises(StateError, match="only assumed starts"):
        state.forget(job, 10.0)
    with pytest.raises(StateError, match="confirmed while RUNNING"):
        state.confirm(job, 10.0)


def test_fail_requeues_counts_the_attempt_and_loses_progress():
    state = make_state()
    physics = Physics(state)
    job = Job("j", "v", 1, 0.0, 100.0)
    state.submit(job, 0.0)
    apply_decision(state, Start(job, ((0, 0b1),)), 0.0, physics)
    epoch = job.epoch
    assert state.fail(job, 30.0, "out of memory") is state.vcs[0]
    assert job.state is JobState.PENDING and job.failures == 1
    assert job.last_failure == "out of memory" and job.epoch == epoch + 1
    assert physics.failed(job, 30.0) == ()  # no speed model: no co-runner moves
    assert job._remaining == 100.0  # no checkpoint: the 30 s of work are lost (the physics' truth)
    assert state.failed == 1 and state.busy_gpus == 0 and len(state.vcs[0].queue) == 1
    state.check_invariants()


def test_preempt_through_apply_settles_and_pays_the_overhead():
    state = make_state()
    physics = Physics(state, preemption_overhead=lambda job: 7.0)
    job = Job("j", "v", 1, 0.0, 100.0)
    state.submit(job, 0.0)
    assert apply_decision(state, Start(job, ((0, 0b1),)), 0.0, physics) == [job]
    assert physics.remaining(job, 30.0) == 70.0
    apply_decision(state, Preempt(job), 40.0, physics)
    assert job._remaining == pytest.approx(60.0 + 7.0) and job.preemptions == 1
    assert physics.remaining(job, 50.0) == pytest.approx(67.0)  # queued: no progress


def test_the_kernel_alone_books_no_truth_on_a_stop():
    """Without a physics (the live service) a preemption changes occupancy and the run record
    only: the job's remaining time is nobody's business but a simulated backend's."""
    state = make_state()
    job = Job("j", "v", 1, 0.0, 100.0)
    state.submit(job, 0.0)
    apply_decision(state, Start(job, ((0, 0b1),)), 0.0)
    apply_decision(state, Preempt(job), 40.0)
    assert job._remaining == 100.0 and job.preemptions == 1 and job.state is JobState.PENDING
    assert apply_decision(state, Postpone(job, "waiting for a better placement"), 40.0) == []
    assert state.postponed == 1


def test_job_index_and_unique_ids():
    state = make_state()
    a = Job("a", "v", 1, 0, 1)
    state.submit(a, 0)
    assert state.jobs["a"] is a
    with pytest.raises(StateError, match="already known"):
        state.submit(Job("a", "v", 1, 0, 1), 0)


def test_cordon_keeps_running_jobs_and_blocks_new_ones():
    state = make_state()
    vc = state.vcs[0]
    job = Job("j", "v", 2, 0, 10)
    state.submit(job, 0)
    state.start(job, ((0, 0b0011),), 0)
    state.cordon(0, 1.0)
    assert vc.free == 4 and vc.buckets[2] == 0 and state.node_free[0] == 0
    state.check_invariants()
    other = Job("o", "v", 1, 0, 10)
    state.submit(other, 1)
    with pytest.raises(StateError, match="cordoned"):
        state.start(other, ((0, 0b0100),), 1)
    state.finish(job, 10.0)  # the cordoned node does not come back by itself
    assert state.node_free[0] == 0 and vc.free == 4
    state.check_invariants()
    state.uncordon(0, 11.0)
    assert state.node_free[0] == 4 and vc.free == 8 and vc.buckets[4] == 0b11
    state.check_invariants()


def test_nodes_join_and_leave():
    state = make_state(nodes=1)
    vc = state.vcs[0]
    big = NodeSpec("v-big", "v", 8, GpuType("A100", 40 * 1024))
    node = state.add_node(big)
    assert node == 1 and vc.nodes == [0, 1] and vc.total_gpus == 12 and vc.max_node_gpus == 8
    assert vc.gpus_per_node == 0 and state.node_mem[1] == 40 * 1024  # mixed VC; memory per GPU type
    state.check_invariants()
    job = Job("j", "v", 8, 0, 10)
    state.submit(job, 0)
    state.start(job, ((1, 0xFF),), 0)
    with pytest.raises(StateError, match="still runs 1 jobs"):
        state.remove_node(1)
    state.finish(job, 10)
    state.remove_node(1, 11)
    assert vc.total_gpus == 4 and state.total_gpus == 4 and "v-big" not in state.node_index
    state.check_invariants()
    with pytest.raises(StateError, match="not in the cluster"):
        late = Job("late", "v", 1, 12, 1)
        state.submit(late, 12)
        state.start(late, ((1, 0b1),), 12)
    new_vc_node = state.add_node(NodeSpec("w-0", "w", 2))  # a new VC appears with its first node
    assert state.vcs[state.vc_index["w"]].nodes == [new_vc_node]
    state.check_invariants()


def test_gpu_level_holders_and_memory():
    state = make_state(nodes=1, gpus=2, max_jobs_per_gpu=2)
    a, b = Job("a", "v", 1, 0, 10, gpu_mem_mib=20_000), Job("b", "v", 1, 0, 10, gpu_mem_mib=15_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib = 12_000, 9_000
    for j in (a, b):
        state.submit(j, 0)
    state.start(a, ((0, 0b01),), 0)
    state.start(b, ((0, 0b01),), 0, shared=True)
    assert state.gpu_holders(0, 0) == [a, b] and state.gpu_holders(0, 1) == []
    assert state.gpu_pred_mem(0, 0) == 21_000 and Physics(state).gpu_true_mem(0, 0) == 35_000
    assert state.gpu_free_mem(0, 0) == 32 * 1024 - 21_000
    assert state.room_mask(0) == 0b10  # GPU 0 is at the cap of 2 jobs, GPU 1 is free
    c = Job("c", "v", 1, 0, 10)
    state.submit(c, 0)
    with pytest.raises(StateError, match="already hold 2 jobs"):
        state.start(c, ((0, 0b01),), 0, shared=True)
    state.check_invariants()
