"""Pending-job queues. The kernel keeps one per VC; the policy chooses the kind and the key.

``KeyedQueue`` keeps a heap with lazy deletion whose top is always a live entry, so looking at
the head is O(1) and a blocking (no-backfill) pass touches only the jobs it starts plus one.
``ArrivalQueue`` keeps insertion order (first arrival / re-queue after preemption), which is what a
preemptive policy re-sorts on every pass.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from heapq import heappop, heappush
from typing import Protocol

from dlsched.core.job import Job


class JobQueue(Protocol):
    def push(self, job: Job) -> None: ...
    def remove(self, job: Job) -> None: ...
    def head(self) -> Job | None: ...
    pass_order: Callable[[float], list[Job]] | None  # a queue that reorders itself at each pass
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Job]: ...


class KeyedQueue:
    """Jobs ordered by ``key(job)`` then by queue-entry order (like a stable sort)."""

    __slots__ = ("_key", "_heap", "_live", "gpus")

    def __init__(self, key: Callable[[Job], object]) -> None:
        self._key = key
        self._heap: list[list] = []
        self._live: dict[Job, list] = {}
        self.gpus = 0  # GPUs requested by the queued jobs

    def push(self, job: Job) -> None:
        entry = [self._key(job), job.enq_seq, job, True]
        self._live[job] = entry
        heappush(self._heap, entry)
        self.gpus += job.gpus

    def remove(self, job: Job) -> None:
        entry = self._live.pop(job)
        self.gpus -= job.gpus
        heap = self._heap
        if heap[0] is not entry:
            entry[3] = False  # deleted lazily, once it reaches the top
            return
        heappop(heap)  # the common case: the head leaves
        while heap and not heap[0][3]:  # keep the top alive
            heappop(heap)

    def head(self) -> Job | None:
        heap = self._heap
        return heap[0][2] if heap else None  # the top is always a live entry

    # A queue that reorders itself at each pass defines ``pass_order(now) -> list``; None here
    # means a pass walks the queue by ``head()`` (or iterates it, with backfill).
    pass_order = None

    def rekey(self, job: Job) -> None:
        """Re-insert ``job`` after its key changed (e.g. a new priority estimate)."""
        self.remove(job)
        self.push(job)

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self) -> Iterator[Job]:
        """Live jobs in queue order (sorts a copy: use for backfill, not in the blocking path)."""
        return (e[2] for e in sorted(self._live.values(), key=lambda e: (e[0], e[1])))


class ArrivalQueue:
    """Jobs in the order they (re-)entered the queue."""

    __slots__ = ("_jobs", "gpus")

    def __init__(self) -> None:
        self._jobs: dict[Job, None] = {}
        self.gpus = 0

    def push(self, job: Job) -> None:
        self._jobs[job] = None
        self.gpus += job.gpus

    def remove(self, job: Job) -> None:
        del self._jobs[job]
        self.gpus -= job.gpus

    def head(self) -> Job | None:
        return next(iter(self._jobs), None)

    pass_order = None

    def __len__(self) -> int:
        return len(self._jobs)

    def __iter__(self) -> Iterator[Job]:
        return iter(self.jobs())

    def jobs(self) -> list[Job]:
        """The queued jobs in order, as a new list (one copy, where ``list(queue)`` makes two)."""
        return list(self._jobs)
