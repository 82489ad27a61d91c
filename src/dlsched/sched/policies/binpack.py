"""Binpack (Co-scheML's baseline): FIFO order with the ``binpack-mem`` placement -- the GPU with
the most predicted memory in use that still fits the job, even while idle GPUs exist."""

from __future__ import annotations

from dlsched.sched.policies.fifo import FifoPolicy


class BinpackPolicy(FifoPolicy):
    """Binpack by max memory: FIFO, fill the fullest GPU that fits first (no interference model)."""

    name = "binpack"
    default_placement = "binpack-mem"
