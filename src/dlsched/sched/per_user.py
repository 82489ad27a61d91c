"""A pending-job queue ordered by a per-user rank that the policy keeps (LAS's level, fair share's
decayed usage), then by submission and queue entry.

A user's rank changes only when the policy says so (its ``version`` grows: LAS when a job ends,
fair share at each instant with a pass, since running jobs' usage grows), so the queue is
re-sorted then and at arrivals, not at every pass.
"""

from __future__ import annotations

from heapq import heapify, heappop, heappush, heapreplace
from typing import Protocol

from dlsched.core.job import Job


class RanksUsers(Protocol):
    """What the queue needs from its policy."""

    version: int

    def user_rank(self, user: str) -> float: ...


class PerUserQueue:
    """Pending jobs in (their user's rank, submission, queue entry) order, kept incrementally: one
    heap per user (submission, queue entry) and a heap of the users' heads keyed by their rank.
    A pass looks at the head only (``pass_order`` is None: a pass without backfill costs the jobs
    it starts, not the queue), and re-ranking -- at the same moments as the full sort's, after a
    push or when the policy's ``version`` moved -- costs the users with waiting jobs, not the jobs.
    ``PerUserQueue.incremental = False`` builds :class:`SortedPerUserQueue`, the general path (a
    sorted list of every job), which ``tests/test_per_user_incremental.py`` compares it with."""

    __slots__ = ("_entry", "_front", "_in_front", "_live", "_ranked_at", "_ranks", "_users", "gpus", "policy")
    incremental = True  # the shortcut's switch

    def __new__(cls, policy: RanksUsers):
        if not cls.incremental:
            return SortedPerUserQueue(policy)  # not an instance: __init__ is not run
        return super().__new__(cls)

    def __init__(self, policy: RanksUsers) -> None:
        self._live: dict[Job, None] = {}            # arrival order
        self._entry: dict[Job, tuple] = {}          # a waiting job's live entry in its user's heap
        self._users: dict[str, list[tuple]] = {}    # user -> heap of (submit time, queue entry, job)
        self._front: list[tuple] = []               # (rank, submit time, queue entry, entry, user)
        self._in_front: dict[str, tuple] = {}       # user -> the entry the front holds as its head
        self._ranks: dict[str, float] = {}
        self._ranked_at = -1                        # the policy's version of the ranks (-1: stale)
        self.gpus = 0
        self.policy = policy

    def push(self, job: Job) -> None:
        self._live[job] = None
        self.gpus += job.gpus
        user = job.user or ""
        heap = self._users.get(user)
        if heap is None:
            heap = self._users[user] = []
        entry = self._entry[job] = (job.submit_time, job.enq_seq, job)
        heappush(heap, entry)
        policy = self.policy
        if not (getattr(policy, "ranks_follow_version", False) and self._ranked_at == policy.version):
            self._ranked_at = -1  # as the full sort: every user is ranked again at the next look
            return
        # the policy's ranks move only with its version (LAS): this user's rank still holds
        held = self._in_front.get(user)
        if held is None or entry < held:
            rank = self._ranks.get(user)
            if rank is None:
                rank = self._ranks[user] = policy.user_rank(user)
            self._in_front[user] = entry
            heappush(self._front, (rank, entry[0], entry[1], entry, user))

    def remove(self, job: Job) -> None:
        del self._live[job]
        self.gpus -= job.gpus
        del self._entry[job]  # its heap entry dies; dropped when it reaches its heap's top

    def _user_head(self, user: str) -> tuple | None:
        heap = self._users[user]
        entries = self._entry
        while heap:
            entry = heap[0]
            if entries.get(entry[2]) is entry:
                return entry
            heappop(heap)
        del self._users[user]
        return None

    def _rank(self) -> None:
        policy = self.policy
        rank = policy.user_rank
        ranks: dict[str, float] = {}
        front = []
        for user in list(self._users):
            head = self._user_head(user)
            if head is not None:
                r = ranks[user] = rank(user)
                front.append((r, head[0], head[1], head, user))
        heapify(front)
        self._front, self._ranks, self._ranked_at = front, ranks, policy.version
        self._in_front = {f[4]: f[3] for f in front}

    def head(self) -> Job | None:
        if self._ranked_at != self.policy.version:
            self._rank()
        front = self._front
        entries = self._entry
        in_front = self._in_front
        while front:
            top = front[0]
            entry, user = top[3], top[4]
            if in_front.get(user) is not entry:  # superseded by a better head of the same user
                heappop(front)
                continue
            if entries.get(entry[2]) is entry:
                return entry[2]
            # its head left: the user's next job, at the same rank
            nxt = self._user_head(user) if user in self._users else None
            if nxt is None:
                del in_front[user]
                heappop(front)
            else:
                in_front[user] = nxt
                heapreplace(front, (top[0], nxt[0], nxt[1], nxt, user))
        return None

    pass_order = None  # a pass walks head() (and iterates the queue with backfill)

    def __len__(self) -> int:
        return len(self._live)

    def __iter__(self):
        """The waiting jobs in queue order (sorts a copy: for backfill, not the blocking path)."""
        if self._ranked_at != self.policy.version:
            self._rank()
        ranks = self._ranks
        return iter(sorted(self._live, key=lambda j: (ranks[j.user or ""], j.submit_time, j.enq_seq)))


class SortedPerUserQueue:
    """The general path of :class:`PerUserQueue`: a list sorted again whenever the ranks may have
    changed, walked whole by every pass."""

    __slots__ = ("gpus", "jobs", "policy", "sorted_at")

    def __init__(self, policy: RanksUsers) -> None:
        self.jobs: list[Job] = []
        self.gpus = 0
        self.policy = policy
        self.sorted_at = -1  # the policy's version the order was sorted at (-1: unsorted)

    def push(self, job: Job) -> None:
        self.jobs.append(job)
        self.gpus += job.gpus
        self.sorted_at = -1

    def remove(self, job: Job) -> None:
        self.jobs.remove(job)
        self.gpus -= job.gpus

    def _sorted(self) -> list[Job]:
        policy = self.policy
        if self.sorted_at != policy.version:
            ranks = {user: policy.user_rank(user) for user in {j.user or "" for j in self.jobs}}
            self.jobs.sort(key=lambda j: (ranks[j.user or ""], j.submit_time, j.enq_seq))
            self.sorted_at = policy.version
        return self.jobs

    def head(self) -> Job | None:
        jobs = self._sorted()
        return jobs[0] if jobs else None

    def pass_order(self, now: float) -> list[Job]:
        return list(self._sorted())

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self):
        return iter(list(self.jobs))
