"""Small hand-built clusters for the sharing-policy tests: jobs already running where a test says."""

from __future__ import annotations

from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.indexes import make_view
from dlsched.sim import SimConfig
from dlsched.sim.config import no_overhead


def job(jid: str, util: float, mem: float, gpus: int = 1, submit: float = 0.0, duration: float = 100.0,
        true_util: float = float("nan"), true_mem: float = float("nan")) -> Job:
    j = Job(jid, "v", gpus, submit, duration, gpu_util=true_util, gpu_mem_mib=true_mem)
    j.pred_gpu_util, j.pred_gpu_mem_mib = util, mem
    return j


def cluster(nodes: int = 1, gpus: int = 2, memory_mib: int = 10_000) -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({"v": nodes}, gpus_per_node=gpus, gpu_type=GpuType("T", memory_mib))


def state_with(policy, running: list[tuple[Job, int, int]], nodes: int = 1, gpus: int = 2, cap: int = 2,
               memory_mib: int = 10_000) -> tuple[ClusterState, SchedulingView]:
    """A state where each ``(job, node, gpu_mask)`` already runs (shared GPUs allowed)."""
    state = ClusterState(cluster(nodes, gpus, memory_mib), new_queue=policy.new_queue, max_jobs_per_gpu=cap)
    for j, node, mask in running:
        state.submit(j, 0.0)
        state.start(j, ((node, mask),), 0.0, shared=True)
    return state, make_view(state, policy)


def config(cap: int = 2) -> SimConfig:
    return SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=cap)
