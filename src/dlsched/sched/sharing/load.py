"""Per-GPU load as the scheduler sees it: the sum of the holders' *predicted* utilisation and
memory, and how many jobs each GPU holds.

Computed on demand from the view's ``node_holders`` (not kept as an index) because a
prediction may be corrected while a job runs (observed utilisation replacing the prior); the
sums then always reflect the latest values. A job without a utilisation prediction counts as a
full GPU (100 %), one without a memory prediction as the whole GPU's memory -- the cautious
reading, as the kernel's own memory check does.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView

FULL_UTIL = 100.0


def pred_util(job: Job) -> float:
    """Predicted GPU utilisation (percent); unknown counts as a full GPU."""
    u = job.pred_gpu_util
    return u if u == u else FULL_UTIL


def pred_mem(job: Job, capacity: float) -> float:
    """Predicted GPU memory (MiB); unknown counts as the whole GPU."""
    m = job.pred_gpu_mem_mib
    return m if m == m else capacity


def too_small(vc: VcState, job: Job) -> int:
    """VC-local bits of the nodes whose GPUs have less memory than ``job``'s prediction, when the
    VC's nodes with enough can hold the job (one of them has its GPUs, or, for a job wider than
    every node, they have as many GPUs together); else 0. A sharing placement keeps the job off
    them, free GPUs included: a free GPU takes a job only where its memory fits the prediction,
    as a shared one does. Nothing is excluded for a job without a prediction, on a VC whose nodes
    all have the same memory, or for a job no set of large enough nodes can hold (it would wait
    forever; it runs wherever GPUs are free, as before)."""
    m = job.pred_gpu_mem_mib
    if not vc.min_gpu_mem < m <= vc.max_gpu_mem:   # NaN: False
        return 0
    out = 0
    for mem, mask, gpus, widest in vc.mem_levels:
        if mem >= m:
            need = job.gpus
            fits = need <= widest or (need > vc.max_node_gpus and need <= gpus)
            return out if fits else 0
        out |= mask
    return 0


class NodeLoad:
    """Predicted utilisation, memory and job count of each GPU of one node."""

    __slots__ = ("capacity", "jobs", "mem", "util")

    def __init__(self, view: ClusterView, node: int) -> None:
        n = view.node_gpus[node]
        cap = view.node_mem[node]
        self.capacity = cap
        self.util = [0.0] * n
        self.mem = [0.0] * n
        self.jobs = [0] * n
        util, mem, jobs = self.util, self.mem, self.jobs
        for job, mask in view.node_holders[node].items():
            u, m = pred_util(job), pred_mem(job, cap)
            while mask:
                low = mask & -mask
                g = low.bit_length() - 1
                util[g] += u
                mem[g] += m
                jobs[g] += 1
                mask ^= low


def cheapest(costs: list[tuple[float, int]], count: int) -> tuple[float, int]:
    """Sum of the ``count`` lowest costs and the mask of their GPUs (lowest index on ties)."""
    costs.sort()
    total, mask = 0.0, 0
    for c, g in costs[:count]:
        total += c
        mask |= 1 << g
    return total, mask
