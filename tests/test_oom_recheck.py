"""The OOM failure model re-checks a pending crash whenever the GPU's holders change (issue 23):
hand-checked timelines on one 16 GiB GPU, no speed model (every rate is 1)."""

from __future__ import annotations

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job
from dlsched.models.failure import OutOfMemory
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead


def one_gpu() -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1, gpu_type=GpuType("T", 16 * 1024))


def simulate(a_duration: float, b_duration: float, delay: float = 60.0):
    """A (10,000 true MiB) from 0; B (9,000 true, 4,000 predicted) joins A's GPU at 20."""
    a = Job("a", "v", 1, 0, a_duration, gpu_mem_mib=10_000)
    b = Job("b", "v", 1, 20, b_duration, gpu_mem_mib=9_000)
    a.pred_gpu_mem_mib, b.pred_gpu_mem_mib = 10_000, 4_000
    oom = OutOfMemory(delay=delay)
    res = Simulator(one_gpu(), make_policy("fifo", share=True),
                    SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=2),
                    failure_model=oom).run([a, b])
    return a, b, res, oom


def test_partner_leaves_before_the_crash_time_no_crash():
    """B joins at 20 and would crash at 80 (60 s to its peak); A ends at 50, before that: the
    GPU holds 9,000 MiB from then on, the crash is called off and B runs through (20 + 200 = 220)."""
    a, b, res, oom = simulate(a_duration=50, b_duration=200)
    assert (a.start_time, a.end_time) == (0, 50)
    assert (b.start_time, b.end_time) == (20, 220)
    assert b.failures == 0 and res.extra["failures"] == 0
    assert oom.disarmed == 1


def test_partner_still_there_at_the_crash_time_crashes_and_loses_its_work():
    """A runs to 200: B crashes at 80 (20 + 60), its 60 s of progress lost, waits for A (its
    request corrected to 9,000 MiB no longer fits beside A), restarts at 200, ends at 400 (200 s of work from scratch)."""
    a, b, res, oom = simulate(a_duration=200, b_duration=200)
    assert (a.start_time, a.end_time) == (0, 200)
    assert b.failures == 1 and res.extra["failures"] == 1
    assert b.end_time == 400 and b.queue_delay == 200 - 80
    assert oom.disarmed == 0


def test_a_job_shorter_than_the_delay_crashes_before_it_ends():
    """B has 30 s of work, shorter than the 60 s delay: it reaches its peak within its first
    steps, so it crashes at 20 + 30 / 2 = 35 instead of overfilling the GPU and finishing at 50;
    it reruns alone once A ends at 200 (ends 230)."""
    _, b, _, _ = simulate(a_duration=200, b_duration=30)
    assert b.failures == 1 and b.end_time == 230
    assert b.queue_delay == 200 - 35


def test_a_partner_that_leaves_after_the_crash_changes_nothing():
    """A ends at 90, after B's crash at 80: B crashed (lost 60 s) and restarts at 90, ends 290."""
    _, b, _, _ = simulate(a_duration=90, b_duration=200)
    assert b.failures == 1 and b.end_time == 290
