"""An arrival-order queue that also keeps its jobs' requests (GPUs, predicted memory) as arrays.

A policy that screens the whole queue by request on every pass (Horus's scan of the jobs that
a failed placement does not rule out) reads them with :meth:`RequestQueue.requests` -- a few
array operations -- instead of collecting them from every job each pass. The arrays are kept
incrementally: a push appends a slot, a remove marks it dead, and the dead slots are squeezed
out once they outnumber the live ones.

The predicted memory is read when a job is queued. A waiting job whose prediction changes
(Horus's failover corrects it after an out-of-memory crash) must be re-read with
:meth:`RequestQueue.refresh`.
"""

from __future__ import annotations

import numpy as np

from dlsched.core.job import Job
from dlsched.kernel.queues import ArrivalQueue

_MIN_SLOTS = 64


class RequestQueue(ArrivalQueue):
    """Jobs in the order they (re-)entered the queue, with their GPUs and predicted memory."""

    __slots__ = ("_alive", "_gpus", "_mem", "_used", "most_gpus")

    def __init__(self) -> None:
        super().__init__()
        self._jobs: dict[Job, int] = {}  # job -> its slot (slots rise in queue order)
        self._used = 0  # slots handed out, dead ones included
        self.most_gpus = 0  # the most GPUs a job ever queued here asks for
        self._gpus = np.zeros(_MIN_SLOTS, np.int64)
        self._mem = np.zeros(_MIN_SLOTS, float)
        self._alive = np.zeros(_MIN_SLOTS, bool)

    def push(self, job: Job) -> None:
        slot = self._used
        if slot == len(self._alive):
            slot = self._make_room()
        self._used = slot + 1
        self._jobs[job] = slot
        self._gpus[slot] = job.gpus
        self._mem[slot] = job.pred_gpu_mem_mib
        self._alive[slot] = True
        self.gpus += job.gpus
        self.most_gpus = max(self.most_gpus, job.gpus)

    def remove(self, job: Job) -> None:
        self._alive[self._jobs.pop(job)] = False
        self.gpus -= job.gpus

    def refresh(self, job: Job) -> None:
        """Re-read a waiting job's predicted memory (it was corrected while the job waited)."""
        slot = self._jobs.get(job)
        if slot is not None:
            self._mem[slot] = job.pred_gpu_mem_mib

    def requests(self) -> tuple[np.ndarray, np.ndarray]:
        """GPUs and predicted memory (NaN: none) of the queued jobs, in queue order (copies)."""
        used = self._used
        if len(self._jobs) == used:
            return self._gpus[:used].copy(), self._mem[:used].copy()
        live = self._alive[:used].nonzero()[0]
        return self._gpus[live], self._mem[live]

    def _make_room(self) -> int:
        """Squeeze out the dead slots, or double the arrays when most slots are live; returns
        the first free slot."""
        n = len(self._jobs)
        if n * 2 > len(self._alive):
            size = 2 * len(self._alive)
            for name in ("_gpus", "_mem", "_alive"):
                old = getattr(self, name)
                new = np.zeros(size, old.dtype)
                new[:len(old)] = old
                setattr(self, name, new)
            return self._used
        live = self._alive[:self._used].nonzero()[0]
        self._gpus[:n] = self._gpus[live]
        self._mem[:n] = self._mem[live]
        self._alive[:n] = True
        self._alive[n:] = False
        jobs = self._jobs
        for slot, job in enumerate(jobs):
            jobs[job] = slot
        self._used = n
        return n
