"""OBP (Horus §5.2): FIFO order with the ``obp`` placement -- share a GPU whenever its holders'
predicted memory leaves room, the least memory-loaded GPUs first."""

from __future__ import annotations

from dlsched.sched.policies.fifo import FifoPolicy


class ObpPolicy(FifoPolicy):
    """Opportunistic bin packing: FIFO, co-locate where predicted memory fits (least loaded)."""

    name = "obp"
    default_placement = "obp"
