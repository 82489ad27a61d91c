"""ClusterState: the one owner of occupancy. Events change it; invariants hold; errors are loud."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState, StateError


def make_state(vcs=None, max_jobs_per_gpu: int = 1) -> ClusterState:
    return ClusterState(ClusterSpec.from_vc_sizes(vcs or {"a": 2, "b": 1}, gpus_per_node=4), new_queue=ArrivalQueue,
                        max_jobs_per_gpu=max_jobs_per_gpu)


def test_layout_and_buckets():
    state = make_state()
    assert state.total_gpus == 12
    a = state.vcs[state.vc_index["a"]]
    assert (a.nodes, a.total_gpus, a.free) == ([0, 1], 8, 8)
    assert a.buckets[4] == 0b11 and a.gpus_per_node == 4


def test_start_finish_updates_everything_and_checks():
    state = make_state()
    job = Job("j1", "a", 3, 0.0, 10.0)
    state.submit(job, 0.0)
    vc = state.start(job, ((1, 0b0111),), 5.0)
    assert job.state is JobState.RUNNING and job.start_time == 5.0 and job.queue_delay == 5.0
    assert state.node_free[1] == 1 and vc.free == 5 and state.busy_gpus == 3
    assert vc.buckets[1] == 0b10 and vc.buckets[4] == 0b01
    state.check_invariants()
    state.finish(job, 15.0)
    assert job.end_time == 15.0 and state.busy_gpus == 0 and vc.buckets[4] == 0b11
    state.check_invariants()
    with pytest.raises(StateError, match="exactly once"):
        state.finish(job, 16.0)


def test_double_booking_rejected_unless_shared():
    state = make_state(max_jobs_per_gpu=2)
    j1, j2, j3 = Job("j1", "a", 2, 0, 5), Job("j2", "a", 1, 0, 5), Job("j3", "a", 1, 0, 5)
    for j in (j1, j2, j3):
        state.submit(j, 0.0)
    state.start(j1, ((0, 0b0011),), 0.0)
    with pytest.raises(StateError, match="double booking"):
        state.start(j2, ((0, 0b0010),), 0.0)
    state.start(j2, ((0, 0b0010),), 0.0, shared=True)   # co-location: allowed when asked
    assert state.node_free[0] == 2 and state.gpu_count[0][:2] == [1, 2] and state.node_share[0] == 0b0001
    assert state.gpu_holders(0, 1) == [j1, j2]
    state.check_invariants()
    state.finish(j1, 1.0)
    assert state.node_free[0] == 3 and state.node_mask[0] == 0b0010 and state.node_share[0] == 0b0010
    state.check_invariants()
    with pytest.raises(StateError, match="not in VC"):
        state.start(j3, ((2, 0b1),), 1.0)


def test_preempt_requeues_and_counts():
    state = make_state()
    job = Job("j", "b", 4, 0.0, 100.0)
    state.submit(job, 0.0)
    state.start(job, ((2, 0b1111),), 1.0)
    epoch = job.epoch
    state.preempt(job, 11.0)
    assert job.state is JobState.PENDING and job.preemptions == 1 and job.epoch == epoch + 1
    assert len(state.vcs[state.vc_index["b"]].queue) == 1
    state.start(job, ((2, 0b1111),), 20.0)
    assert job.queue_delay == pytest.approx(1.0 + 9.0) and job.start_time == 1.0


def test_power_off_and_on():
    state = make_state()
    vc = state.vcs[state.vc_index["a"]]
    state.power_off(1)
    assert vc.free == 4 and vc.buckets[4] == 0b01 and state.powered_count == 2 and state.powered_gpus == 8
    state.check_invariants()
    job = Job("j", "a", 1, 0, 1)
    state.submit(job, 0)
    with pytest.raises(StateError, match="powered off"):
        state.start(job, ((1, 0b1),), 0)
    state.start(job, ((0, 0b1),), 0)
    with pytest.raises(StateError, match="busy"):
        state.power_off(0)
    state.power_on(1)
    assert vc.free == 7 and state.powered_count == 3
    state.check_invariants()


def test_unknown_vc_is_an_error():
    state = make_state()
    with pytest.raises(StateError, match="unknown VC"):
        state.submit(Job("x", "zzz", 1, 0, 1), 0)
