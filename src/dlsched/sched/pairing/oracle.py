"""The co-location oracle (upper bound): pairs with the least *true* interference.

It reads ground truth -- the true pair table and each job's true memory -- so it declares
``oracle = True`` (the explicit grant). ``truth`` answers ``pair(job, other, gpu) -> s(job |
other)`` from the measured pairs: the simulation's own ground-truth model
(:class:`~dlsched.models.colocation.ColocationSpeed`; by default one on the built-in table, the
same the ``colocation`` speed model uses). Its OOM check uses the true memory, so it never
crashes a job.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.pairing.base import PairingPolicy


class OraclePairingPolicy(PairingPolicy):
    """Oracle pairing: the least true interference (true pair table), true memory."""

    name = "oracle-pairing"
    oracle = True

    def __init__(self, placer, backfill: bool = False, window: int = 64, truth=None) -> None:
        super().__init__(placer, backfill, window)
        if truth is None:
            from dlsched.models.colocation import ColocationSpeed

            truth = ColocationSpeed()
        self.truth = truth
        self._keys: dict[str, str] = {}

    def memory(self, job: Job, capacity: float) -> float:
        m = job._gpu_mem_mib
        return m if m == m else super().memory(job, capacity)

    def pair_value(self, running: Job, waiting: Job, gpu_type: str, capacity: float) -> float:
        gpu = self._keys.get(gpu_type)
        if gpu is None:
            gpu = self._keys[gpu_type] = self.truth.table.gpu_key(gpu_type)
        return self.truth.pair(waiting, running, gpu) + self.truth.pair(running, waiting, gpu)
