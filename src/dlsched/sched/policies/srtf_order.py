"""SRTF's incremental rank: the pending jobs kept in order between passes, and the greedy cut
walked as a merge instead of a sort of every pending and running job of the VC.

Why: a congested VC holds a queue that grows with the trace. Sorting it on every pass made SRTF's
cost per job grow with the number of jobs (issue 38: 10x the jobs cost 50x). Here

* a pending job is ranked once, at the first pass after it (re-)entered the queue -- its rank key
  (true or predicted remaining time) does not change while it waits: the physics books a
  preempted job's work and checkpoint overhead before that pass, and a waiting job does no work;
* pending jobs sit in one heap per GPU count, so the cut (:func:`greedy_cut`) merges only the
  heaps whose jobs still fit the quota left: once a GPU count exceeds it, every later job of that
  count would be skipped by the full walk, so the merge drops the heap instead of walking it;
* running jobs are walked by stretches: the ones ranked between two pending jobs that fit keep
  their GPUs in one step when their sum fits (prefix sums), else up to the first that does not
  fit, which is preempted (bisect) -- a pass costs its starts and preemptions, plus ranking the
  running jobs.

The decisions are the full sort's, job for job: the same ``(key, is_running, queue/start order)``
tuples are compared, only fewer of them (``tests/test_srtf_incremental.py`` runs both ways).
Running jobs are still ranked at every pass (their remaining time moves with the clock); there
are at most as many as the VC has GPUs.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from collections.abc import Callable
from heapq import heapify, heappop, heappush, heapreplace
from itertools import accumulate

from dlsched.core.job import Job
from dlsched.kernel.queues import ArrivalQueue

# a pending entry: (rank key, queue-entry order, job); live while it is its waiting job's entry
Entry = tuple[float, int, Job]


class RankQueue(ArrivalQueue):
    """The pending jobs of one VC in arrival order (read as an :class:`~dlsched.kernel.queues.ArrivalQueue`
    by everyone else who reads the queue: head, length, iteration, ``jobs()``), plus the rank heaps the
    SRTF cut merges."""

    __slots__ = ("_dead", "_entry", "_heaps", "_inbox", "_taken")

    def __init__(self) -> None:
        super().__init__()
        self._inbox: dict[Job, None] = {}        # (re-)queued since the last pass: not ranked yet
        self._entry: dict[Job, Entry] = {}       # a ranked waiting job's live entry
        self._heaps: dict[int, list[Entry]] = {}  # GPU count -> heap of entries (some dead)
        self._dead = 0                            # dead entries left in the heaps
        self._taken: list[tuple[int, Entry]] = []  # entries the last cut took off their heaps

    # -- the kernel's queue protocol ----------------------------------------------------------
    def push(self, job: Job) -> None:
        self._jobs[job] = None
        self._inbox[job] = None
        self.gpus += job.gpus

    def remove(self, job: Job) -> None:
        del self._jobs[job]
        self.gpus -= job.gpus
        self._inbox.pop(job, None)
        if self._entry.pop(job, None) is not None:  # it was ranked: its entry dies in its heap
            self._dead += 1

    # -- the rank --------------------------------------------------------------------------------
    def rank_new(self, key: Callable[[Job], float]) -> dict[int, list[Entry]]:
        """Rank the jobs queued since the last pass with ``key`` and return the heaps (GPU count ->
        entries). Dead entries are dropped wholesale once they outnumber the live ones."""
        heaps = self._heaps
        if self._taken:  # the last cut's picks that did not start go back to their heaps
            for gpus, entry in self._taken:
                if self._entry.get(entry[2]) is entry:
                    heappush(heaps[gpus], entry)
                else:
                    self._dead -= 1  # counted when its job left: gone for good now
            self._taken.clear()
        if self._dead > 1024 and self._dead > len(self._jobs):
            self._compact()
        entries = self._entry
        for job in self._inbox:
            heap = heaps.get(job.gpus)
            if heap is None:
                heap = heaps[job.gpus] = []
            entry = entries[job] = (key(job), job.enq_seq, job)
            heappush(heap, entry)
        self._inbox.clear()
        return heaps

    def live(self, entry: Entry) -> bool:
        """Whether ``entry`` is a waiting job's current one (not one it left by starting)."""
        return self._entry.get(entry[2]) is entry

    def _compact(self) -> None:
        for gpus, heap in list(self._heaps.items()):
            kept = [e for e in heap if self.live(e)]
            heapify(kept)
            if kept:
                self._heaps[gpus] = kept
            else:
                del self._heaps[gpus]
        self._dead = 0

    def head_of(self, gpus: int) -> Entry | None:
        """The best live entry of the jobs of ``gpus`` GPUs, left in its heap (dead tops dropped)."""
        heap = self._heaps[gpus]
        entries = self._entry
        while heap:
            entry = heap[0]
            if entries.get(entry[2]) is entry:
                return entry
            heappop(heap)
            self._dead -= 1
        return None

    def take(self, gpus: int) -> None:
        """The cut picked the head of ``gpus``'s heap: off the heap until the next cut, which puts
        it back if its job did not start."""
        self._taken.append((gpus, heappop(self._heaps[gpus])))


def greedy_cut(queue: RankQueue, key: Callable[[Job], float], running: list[tuple[float, int, int, Job]],
               quota: int) -> tuple[list[tuple[float, Job]], list[Job]]:
    """SRTF's cut of ``quota`` GPUs over the pending jobs (ranked by ``key``) and ``running`` (sorted
    ``(remaining, 1, start order, job)``): walk everyone in rank order, pending first on ties; a job
    whose GPUs fit what is left takes them, a running one that does not fit is preempted. Returns
    (the preempted ``(remaining, job)``, the pending jobs to place, in rank order) -- exactly what
    walking the full sorted list gives.

    The walk is done by events, not by job: between two pending jobs that fit, the running jobs
    ranked in between are taken in one step when their GPUs fit what is left (prefix sums, bisect),
    and otherwise up to the first that does not fit, which is preempted."""
    heaps = queue.rank_new(key)
    head_of = queue.head_of
    frontier: list[tuple[float, int, Job, int]] = []  # each fitting heap's head: (key, order, job, GPUs)
    for gpus in heaps:
        if gpus <= quota:
            entry = head_of(gpus)
            if entry is not None:
                frontier.append((entry[0], entry[1], entry[2], gpus))
    heapify(frontier)
    lefts = [c[0] for c in running]
    sums = [0, *accumulate([c[3].gpus for c in running])]  # sums[i]: GPUs of running[:i]
    preempt: list[tuple[float, Job]] = []
    r = 0  # running[:r] are walked

    def walk_running(stop: int, quota: int) -> int:
        """Walk running[r:stop] with ``quota`` GPUs left; returns what is left after them."""
        nonlocal r
        while r < stop:
            if sums[stop] - sums[r] <= quota:  # they all keep their GPUs
                quota -= sums[stop] - sums[r]
                r = stop
                break
            i = bisect_right(sums, quota + sums[r], r + 1, stop + 1) - 1  # the first that does not fit
            quota -= sums[i] - sums[r]
            preempt.append((lefts[i], running[i][3]))
            r = i + 1
        return quota

    order: list[Job] = []
    while frontier:
        left, _, job, gpus = frontier[0]
        if gpus <= quota:
            # the running jobs ranked before it (a tie ranks the pending job first)
            quota = walk_running(bisect_left(lefts, left, r), quota)
        if gpus <= quota:
            quota -= gpus
            order.append(job)
            queue.take(gpus)
            entry = head_of(gpus)
            if entry is not None:
                heapreplace(frontier, (entry[0], entry[1], entry[2], gpus))
                continue
        # else: too big for what is left, now and for the rest of the pass: its heap is dropped
        heappop(frontier)
    walk_running(len(running), quota)
    return preempt, order
