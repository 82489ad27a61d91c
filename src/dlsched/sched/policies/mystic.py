"""Mystic (Ukidave et al., IPDPS'16; Co-scheML's baseline): pair the least similar jobs.

Jobs are described by their *predicted* metrics -- utilisation (share of 100 %) and memory (share
of the GPU) -- and a pair's similarity is ``1 - mean |difference|``; the least similar pairs go
first (dissimilar jobs contend for different resources). No OOM prediction.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.pairing_base import PairingPolicy
from dlsched.sched.sharing.load import pred_mem, pred_util


class MysticPolicy(PairingPolicy):
    """Mystic: pairs with the least similar predicted metrics first (no OOM check)."""

    name = "mystic"
    oom_check = False

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        du = abs(pred_util(running) - pred_util(waiting)) / 100.0
        dm = abs(pred_mem(running, capacity) - pred_mem(waiting, capacity)) / capacity
        return 1.0 - (min(du, 1.0) + min(dm, 1.0)) / 2.0
