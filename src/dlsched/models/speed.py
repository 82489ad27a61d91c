"""Speed models that need no profile data: GPU time slicing.

:class:`TimeSlicedSpeed` is the baseline for GPU sharing without an interference model: a GPU
that holds ``n`` jobs gives each ``1/n`` of its time (as CUDA time slicing does, before any
contention effects), and a job spanning several GPUs runs at the pace of its most crowded one.
"""

from __future__ import annotations

from dlsched.core.bits import bit_tuple
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState


class TimeSlicedSpeed:
    name = "time-sliced"
    scope = "gpu"

    def rate(self, job: Job, state: ClusterState) -> float:
        worst = 1
        if state.cap > 1:  # the kernel counts each GPU's holders: the most crowded one, read off
            counts_of = state.gpu_count
            for node, mask in job.placement:
                counts = counts_of[node]
                for g in bit_tuple(mask):
                    n = counts[g]
                    if n > worst:
                        worst = n
            return 1.0 / worst
        for node, mask in job.placement:
            holders = state.node_holders[node]
            if len(holders) == 1:
                continue
            for g_mask in _bits(mask):
                n = sum(1 for m in holders.values() if m & g_mask)
                if n > worst:
                    worst = n
        return 1.0 / worst


def _bits(mask: int):
    while mask:
        low = mask & -mask
        yield low
        mask ^= low
