"""Failure models: out of memory when the true memory on a GPU exceeds its capacity.

:class:`OutOfMemory` (Horus §4.2's failover case): when a job starts on GPUs whose holders'
*true* peak memory (measured, ``gpu_mem_mib``) adds up to more than the GPU's capacity, the job
that just joined crashes ``delay`` seconds later (the time to build the model and reach the
first training step's peak). It goes back to its queue with the attempt counted, its progress
since the start lost, and the observed memory recorded on the job (``observed_mem_mib``: the
crash report says how much it needed), so a policy's ``job_failed`` hook can correct its
request before it runs again. Jobs without a measured memory never fail.
"""

from __future__ import annotations

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState


class OutOfMemory:
    name = "oom"

    def __init__(self, delay: float = 60.0) -> None:
        if delay < 0:
            raise ValueError(f"the OOM delay must be >= 0 s, got {delay}")
        self.delay = delay

    def on_start(self, job: Job, state: ClusterState, now: float) -> list[tuple[float, Job, str]]:
        need = job._gpu_mem_mib
        if need != need:  # no measurement: nothing to check
            return []
        for node, mask in job.placement:
            cap = state.node_mem[node]
            for g in set_bits(mask):
                used = state.gpu_true_mem(node, g)
                if used > cap:
                    job.observed_mem_mib = need
                    reason = (f"out of memory on GPU {g} of node {state.node_ids[node]}: its jobs need "
                              f"{used:,.0f} MiB, it has {cap:,.0f} MiB")
                    return [(now + self.delay, job, reason)]
        return []
