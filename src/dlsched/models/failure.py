"""Failure models: out of memory when the true memory on a GPU exceeds its capacity.

:class:`OutOfMemory` (Horus §4.2's failover case): when a job starts on GPUs whose holders'
*true* peak memory (measured, ``gpu_mem_mib``) adds up to more than the GPU's capacity, the job
that just joined crashes ``delay`` seconds later (the time to build the model and reach the
first training step's peak). It goes back to its queue with the attempt counted, its progress
since the start lost, and the observed memory recorded on the job (``observed_mem_mib``: the
crash report says how much it needed; written when the crash happens, never before, so no pass
between the start and the crash sees it), so a policy's ``job_failed`` hook can correct its
request before it runs again. Jobs without a measured memory never fail.

The crash also shows who filled the GPU: when the kernel fails the job it tells the model
(:meth:`OutOfMemory.failed`), and every co-runner on a GPU the crashed job overfilled whose true
peak exceeds its predicted memory gets that peak as an *observation*
(:func:`dlsched.kernel.correction.observe`: the prediction is replaced, the prior kept), as a node
agent would report it for a running process. Correcting only the crashed job would let a policy
put it back beside an under-predicted co-runner until ``max_failures``.
"""

from __future__ import annotations

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.correction import observe
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
                used = state._gpu_true_mem(node, g)
                if used > cap:
                    reason = (f"out of memory on GPU {g} of node {state.node_ids[node]}: its jobs need "
                              f"{used:,.0f} MiB, it has {cap:,.0f} MiB")
                    return [(now + self.delay, job, reason)]
        return []

    def failed(self, job: Job, state: ClusterState, now: float, reason: str) -> None:
        """``job`` crashes now (before it releases its GPUs): its crash report gives its peak
        memory, and its co-runners' peaks are observed on each of its GPUs whose holders truly
        need more than the GPU has."""
        if not reason.startswith("out of memory"):
            return
        job.observed_mem_mib = job._gpu_mem_mib  # the crash report: how much it needed
        for node, mask in job.placement or ():
            cap = state.node_mem[node]
            for g in set_bits(mask):
                if not state._gpu_true_mem(node, g) > cap:
                    continue
                for other in state.gpu_holders(node, g):
                    peak = other._gpu_mem_mib
                    if other is not job and peak == peak and not other.pred_gpu_mem_mib >= peak:
                        observe(other, float("nan"), peak, now, state)
