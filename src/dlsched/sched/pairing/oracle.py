"""The co-location oracle (upper bound): pairs with the least *true* interference.

It reads ground truth -- each job's measured profile and the true pair table -- so it declares
``oracle = True`` (the explicit grant). ``truth`` is the interference model the simulation's
ground truth uses (e.g. a lookup of the measured pairs); without one, the Horus curve on the
*measured* utilisation stands in. Its OOM check uses the true memory, so it never crashes.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.pairing.base import PairingPolicy
from dlsched.sched.sharing.curve import CurveSlowdown
from dlsched.sched.sharing.profile import true_profile


class OraclePairingPolicy(PairingPolicy):
    """Oracle pairing: the least true interference, true memory (reads ground truth)."""

    name = "oracle-pairing"
    oracle = True

    def __init__(self, placer, backfill: bool = False, window: int = 64, truth=None) -> None:
        super().__init__(placer, backfill, window)
        self.truth = truth if truth is not None else CurveSlowdown()

    def memory(self, job: Job, capacity: float) -> float:
        m = job._gpu_mem_mib
        return m if m == m else super().memory(job, capacity)

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        a, b = true_profile(running), true_profile(waiting)
        return self.truth.slowdown(a, [b], gpu_type) + self.truth.slowdown(b, [a], gpu_type)
