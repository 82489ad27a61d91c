"""Loadbalance (Co-scheML's baseline, Fig. 1-b): pair so that the GPU's summed *predicted*
average utilisation is the lowest -- a heavy job goes beside a light one. No OOM prediction."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.pairing_base import PairingPolicy
from dlsched.sched.sharing.load import pred_util


class LoadbalancePolicy(PairingPolicy):
    """Loadbalance: pairs with the least summed predicted utilisation (no OOM check)."""

    name = "loadbalance"
    oom_check = False

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        return pred_util(running) + pred_util(waiting)
