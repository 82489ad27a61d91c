"""Horus (TPDS'21, Algorithm 1): k job queues by k-means, weighted-fair rounds, cost placement.

Each scheduling pass over a VC:

1. **queues** (line 2): the pending jobs are grouped by L1 k-means (:mod:`dlsched.sched.kmeans`)
   on (tasks, predicted utilisation, GPUs per task, predicted memory); a task is one node's
   share of the job (``ceil(gpus / GPUs per node)`` tasks).
2. **weighted-fair pick** (line 4): each round takes ``beta`` jobs, ``w_x / sum(w) * beta`` of
   them from queue ``x`` (largest remainders; a queue's leftover share goes to the others),
   ``w_x = max(len(Q_x), median wait(Q_x) * len(Q_x))``; inside a queue the longest-waiting
   jobs first, and the round's jobs are tried longest-waiting first.
3. **placement** (lines 6-18): the placement pipeline -- with ``horus-cost`` (the default of
   ``horus``) that is the capacity check (predicted memory, per-GPU job cap) and the top-lambda
   cheapest GPUs of Eq. 7-10. A job that does not fit is skipped (``continue``), not blocking.

Rounds repeat until every pending job was tried once or no GPU has room (``rounds`` caps them
per pass, e.g. one round per scheduling instant as a live scheduler's tick). Horus uses k = 1 in
the testbed; **Horus-f** (``horus-f``) is k = 3. A job that crashed out of memory is resubmitted
with its request corrected (the inherited ``job_failed``, Horus §4.2.3).

With the cost placement alone, the (GPUs, predicted memory) that failed are carried from a pass
to the VC's next one (:class:`FailedFits`, :mod:`dlsched.sched.roomgains`): a job needing at
least as much is skipped without a placement attempt while no room was gained for it. The
decisions are those of passes that start from nothing (``carry_failures = False``).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import lru_cache
from operator import attrgetter

import numpy as np

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.framework import shared_gpu_use
from dlsched.sched.kmeans import l1_kmeans, list_median
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.requestqueue import RequestQueue
from dlsched.sched.roomgains import RoomGains
from dlsched.sched.sharing.load import FULL_UTIL, pred_mem

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE
_NAN = math.nan
_VECTOR_FROM = 48  # positions to scan from which _Candidates uses numpy
_gpus_of, _mem_of = attrgetter("gpus"), attrgetter("pred_gpu_mem_mib")
_util_of = attrgetter("pred_gpu_util")


def allot(weights: list[float], lengths: list[int], beta: int) -> list[int]:
    """Jobs to take from each queue: ``w_x / sum(w) * beta`` by largest remainders, never more
    than a queue holds; what a short queue cannot give goes to the others (same rule)."""
    take = [0] * len(weights)
    left = min(beta, sum(lengths))
    while left > 0:
        open_ = [x for x, w in enumerate(weights) if lengths[x] > take[x] and w > 0]
        if not open_:
            break
        total = sum(weights[x] for x in open_)
        shares = {x: weights[x] / total * left for x in open_}
        given = 0
        for x in open_:
            n = min(int(shares[x]), lengths[x] - take[x])
            take[x] += n
            given += n
        if given < left:  # hand out the remainder by largest fractional share
            for x in sorted(open_, key=lambda x: (-(shares[x] - int(shares[x])), x)):
                if given == left:
                    break
                if take[x] < lengths[x]:
                    take[x] += 1
                    given += 1
        left -= given
        if not given:
            break
    return take


def _wait_order(job: Job) -> tuple[float, int]:
    """A round's order: longest waiting first (the wait before the latest queueing counted)."""
    return job.wait_since - job.queue_delay, job.enq_seq


class FailedFits:
    """(GPUs, predicted memory) of jobs the cost placement could not place. A job needing at
    least the GPUs and at least the memory of one of them cannot be placed either while no room
    is gained: kept as the least memory that failed per GPU count, so the test is one look-up
    (``limit``) instead of a scan of every failure, with the same answer."""

    __slots__ = ("_limit", "_table", "least")

    def __init__(self, carried: FailedFits | None = None) -> None:
        self.least: dict[int, float] = dict(carried.least) if carried is not None else {}
        self._limit: dict[int, float] = dict(carried._limit) if carried is not None else {}
        self._table: np.ndarray | None = carried._table if carried is not None else None

    def add(self, gpus: int, mem: float) -> None:
        least = self.least
        if gpus not in least or mem < least[gpus]:
            least[gpus] = mem
            known = self._limit
            for g, b in known.items():  # the limits known from ``gpus`` on can only fall to ``mem``
                if g >= gpus and not b <= mem:  # (NaN: none failed before)
                    known[g] = mem
            self._table = None

    def limit(self, gpus: int) -> float:
        """The least memory that failed with at most ``gpus`` GPUs (NaN: none failed, so no
        memory is at or above it)."""
        b = self._limit.get(gpus)
        if b is None:
            b = self._limit[gpus] = min((m for g, m in self.least.items() if g <= gpus), default=_NAN)
        return b

    def limits(self, top: int) -> np.ndarray:
        """:meth:`limit` of every GPU count from 0 to ``top``, as an array to index by GPU count
        (read only: shared by every set of failures with the same least memories)."""
        table = self._table
        if table is None or len(table) != top + 1:
            table = self._table = _limit_table(tuple(sorted(self.least.items())), top)
        return table


@lru_cache(maxsize=256)
def _limit_table(least: tuple[tuple[int, float], ...], top: int) -> np.ndarray:
    """The table of :meth:`FailedFits.limits` from the least memory that failed per GPU count
    (ascending counts); passes in a row mostly carry the same failures, so it is kept."""
    table = np.full(top + 1, _NAN)  # NaN: nothing failed with as few GPUs
    low = math.inf
    for g, m in least:
        if g > top:
            break
        if m < low:  # the least memory failed with at most g GPUs, from g on
            low = table[g:] = m
    table.flags.writeable = False
    return table


def _feature_arrays(jobs: list[Job], per_node: int, capacity: float) -> np.ndarray:
    """:meth:`HorusPolicy.features` of a long queue with numpy (a Python loop over it every pass
    is slow). The same floats: GPU counts are small integers, exact as floats, and a division or
    ceiling gives the same result in Python and numpy."""
    n = len(jobs)
    gpus = np.fromiter(map(_gpus_of, jobs), float, n)
    util = np.fromiter(map(_util_of, jobs), float, n)
    mem = np.fromiter(map(_mem_of, jobs), float, n)
    tasks = np.maximum(1.0, np.ceil(gpus / per_node))
    out = np.empty((n, 4))
    out[:, 0] = tasks
    out[:, 1] = np.where(np.isnan(util), FULL_UTIL, util)  # NaN: no prediction
    out[:, 2] = gpus / tasks
    out[:, 3] = np.where(np.isnan(mem), capacity, mem)
    return out


@lru_cache(maxsize=64)
def _labels(shape: tuple[int, int], dtype: str, features: bytes, k: int) -> np.ndarray:
    """:func:`l1_kmeans` of the features (as bytes, to be a key), kept for the queues seen
    lately: k-means depends on its input alone, and the same queue comes back often (a pass
    that started nothing, a job that arrived and started at once). Read only."""
    labels = l1_kmeans(np.frombuffer(features, dtype=dtype).reshape(shape), k)
    labels.flags.writeable = False
    return labels


@dataclass(frozen=True, slots=True)
class HorusParams:
    """Horus's knobs: k job queues (None: the policy's own, 1 for horus, 3 for horus-f), beta jobs
    per weighted-fair round, and at most ``rounds`` rounds per pass (None: until every job was tried)."""

    k: int | None = field(default=None, metadata={"help": "horus, horus-f: job queues (default: 1 for horus, 3 "
                                                          "for horus-f)."})
    beta: int = field(default=15, metadata={"help": "horus, horus-f: jobs per weighted-fair round."})
    rounds: int | None = field(default=None, metadata={"help": "horus, horus-f: at most this many rounds per pass "
                                                               "(default: until every job was tried)."})

    def __post_init__(self) -> None:
        if self.k is not None and self.k < 1:
            raise ValueError(f"--param k must be >= 1 job queues, got {self.k}")
        if self.beta < 1:
            raise ValueError(f"--param beta must be >= 1 jobs per round, got {self.beta}")
        if self.rounds is not None and self.rounds < 1:
            raise ValueError(f"--param rounds must be >= 1 per pass (or none: until every job was tried), "
                             f"got {self.rounds}")


class HorusPolicy(OrderingPolicy):
    """Horus: k-means job queues, weighted-fair rounds of beta jobs, Eq. 7-10 cost placement."""

    name = "horus"
    Params = HorusParams
    default_placement = "horus-cost"
    queues_k = 1
    carry_failures = True  # False: every pass starts with no known failure (the reference, for tests)
    needs_indexes = ("room-gains",)  # the driver makes the state's room-gain counter (_carried reads it)

    def __init__(self, placer, backfill: bool = False, k: int | None = None, beta: int = 15,
                 rounds: int | None = None) -> None:
        super().__init__(placer, backfill)
        if rounds is not None and rounds < 1:
            raise ValueError(f"Horus needs rounds >= 1 per pass (or None: until every job was tried), got {rounds}")
        self.rounds = rounds
        self.k = self.queues_k if k is None else int(k)
        if self.k < 1:
            raise ValueError(f"Horus needs k >= 1 queues, got {self.k}")
        if beta < 1:
            raise ValueError(f"Horus needs beta >= 1 jobs per round, got {beta}")
        self.beta = int(beta)
        # VC id -> (room-gain counter, its mark, failures) of the VC's latest pass
        self._carry: dict[int, tuple[RoomGains, tuple[int, int], FailedFits]] = {}

    def new_queue(self) -> RequestQueue:
        return RequestQueue()

    def job_failed(self, job: Job, now: float, reason: str) -> None:
        """The failover's corrected prediction (see the inherited method), re-read by the queue."""
        super().job_failed(job, now, reason)
        job.vc_state.queue.refresh(job)  # new_queue() made it a RequestQueue

    def features(self, jobs: list[Job], vc: VcState, capacity: float) -> np.ndarray:
        """Per job: tasks, predicted utilisation, GPUs per task, predicted memory (Horus §4.2.2)."""
        per_node = max(1, vc.max_node_gpus)
        if len(jobs) >= _VECTOR_FROM:
            return _feature_arrays(jobs, per_node, capacity)
        rows = []
        add = rows.append
        for job in jobs:
            g = job.gpus
            tasks = max(1, math.ceil(g / per_node))
            u, m = job.pred_gpu_util, job.pred_gpu_mem_mib
            add((tasks, u if u == u else FULL_UTIL, g / tasks, m if m == m else capacity))
        return np.array(rows, dtype=float).reshape(len(jobs), 4)

    def queues(self, jobs: list[Job], vc: VcState, capacity: float) -> list[list[Job]]:
        """The k queues, each in queue order (longest waiting first)."""
        if self.k == 1 or len(jobs) <= 1:
            return [jobs]
        features = self.features(jobs, vc, capacity)
        labels = _labels(features.shape, features.dtype.str, features.tobytes(), self.k)
        out: list[list[Job]] = [[] for _ in range(int(labels.max()) + 1)]
        for job, label in zip(jobs, labels.tolist()):
            out[label].append(job)
        return [q for q in out if q]

    def _free_fit(self):
        """The cost placement's exact shortcut for a job some node can take on free GPUs, when
        the placement is that scorer alone (no other scorer, filter or permit could differ)."""
        placer = self.placer
        scorers = placer.scorers
        if (placer.fast_paths and len(scorers) == 1 and not placer.filters and not placer.permits
                and hasattr(scorers[0][0], "free_fit")):
            return scorers[0][0].free_fit
        return None

    def _round_order(self, queues: list[list[Job]], now: float) -> tuple[list[Job], list[int]]:
        """The jobs in the order the rounds take them, and where each round starts (plus the
        end): round ``r`` is ``jobs[starts[r]:starts[r + 1]]``, tried in :func:`_wait_order`.
        The rounds depend on the queues alone (not on what starts), so they are laid out at once."""
        beta = self.beta
        cap = self.rounds if self.rounds is not None else -1
        if len(queues) == 1:
            # one queue: allot gives it min(beta, jobs left) a round whatever its weight (> 0),
            # so the rounds are consecutive slices of the queue and no median is needed
            jobs = queues[0]
            n = len(jobs) if cap < 0 else min(len(jobs), cap * beta)
            return (jobs if n == len(jobs) else jobs[:n]), list(range(0, n, beta)) + [n]
        if sum(map(len, queues)) <= beta:
            # one round holds every job (allot hands out all of them, whatever the weights), and a
            # round is tried in wait order whatever its layout: no median, no allot
            jobs = [job for q in queues for job in q]
            return jobs, [0, len(jobs)]
        medians = [list_median([j.queue_delay + now - j.wait_since for j in q]) for q in queues]
        pos = [0] * len(queues)
        seq: list[Job] = []
        starts: list[int] = []
        while cap:
            cap -= 1
            lengths = [len(q) - p for q, p in zip(queues, pos)]
            if not any(lengths):
                break
            weights = [max(n, med * n) for n, med in zip(lengths, medians)]
            starts.append(len(seq))
            for x, n in enumerate(allot(weights, lengths, beta)):
                seq.extend(queues[x][pos[x]:pos[x] + n])
                pos[x] += n
        starts.append(len(seq))
        return seq, starts

    def _carried(self, view: ClusterView, vc: VcState, share: bool) -> tuple[RoomGains, tuple[int, int], FailedFits | None,
                                                                FailedFits]:
        """The failures carried from this VC's earlier passes that still hold (None: none), and
        the set this pass carries on: those plus its own failures of jobs with a memory
        prediction (a job without one is tried as needing a whole GPU's memory, which says
        nothing certain about a job that does need that much on a GPU with more memory)."""
        gains = view.index("room-gains")
        mark = gains.mark(vc.vid)
        entry = self._carry.get(vc.vid)
        carried = None
        if self.carry_failures and entry is not None and entry[0] is gains and entry[2].least:
            if entry[1] == mark:
                carried = entry[2]
            else:  # jobs stopped since: a failure holds if the nodes they freed still cannot take it
                nodes = gains.nodes_since(vc.vid, entry[1])
                if nodes is not None:
                    carried = _still_failing(entry[2], view, vc, nodes, share)
        out = FailedFits(carried)
        self._carry[vc.vid] = (gains, mark, out)
        return gains, mark, carried, out

    def schedule(self, view: ClusterView, vc: VcState) -> Iterator[Decision]:
        pending = vc.queue.jobs()
        if not pending:
            return
        now = view.now
        # a job without a memory prediction counts as needing a whole GPU: the VC's largest, so
        # that its failure says nothing about a job that could share a GPU with more memory
        capacity = vc.max_gpu_mem
        queues = self.queues(pending, vc, capacity)
        share = self.placer.share and view.max_jobs_per_gpu > 1
        place = self.placer.place
        # on a VC whose nodes differ in GPU memory, fitting is not monotone in memory (a job too
        # large for every GPU runs anywhere, a smaller one only on the large nodes): no failure
        # dominates another there, so every job is tried (and free GPUs are compared by cost)
        free_fit = self._free_fit() if vc.min_gpu_mem == vc.max_gpu_mem else None
        seq, starts = self._round_order(queues, now)
        failed = out = carried = None
        if free_fit is not None:
            # the cost placement alone: fitting depends only on GPUs and predicted memory, and starts
            # only take room away, so a job needing at least what failed fails too -- in this pass,
            # and in later ones until a stop, a node change or a corrected prediction gives room
            gains, mark, carried, out = self._carried(view, vc, share)
            failed = FailedFits(carried)
        if carried is not None:  # to undo the carried failures if room is gained during the pass
            free0, started = vc.free, {}
        # the positions in ``seq`` still to try, without those known to fail (trying them has no
        # side effect); refreshed when the failures grew during a round
        todo = _Candidates(seq, capacity, _requests(vc, pending, queues, len(seq)) if failed is not None else None)
        cand = todo.keep(0, failed)
        c = 0
        r = -1
        while c < len(cand):
            if starts[r + 1] <= cand[c]:
                r = bisect_right(starts, cand[c], r + 1) - 1
            # a round whose jobs are all known to fail changes nothing: checking the room before
            # the next round with candidates gives the same answer as checking before each
            if vc.free == 0 and not (share and vc.share_nodes):
                return
            end = starts[r + 1]
            c0 = c
            while c < len(cand) and cand[c] < end:
                c += 1
            batch = [seq[q] for q in cand[c0:c]]
            if len(batch) > 1:
                batch.sort(key=_wait_order)
            grown = switched = False
            i = 0
            while i < len(batch):
                job = batch[i]
                i += 1
                if not share and job.gpus > vc.free:
                    continue
                if failed is not None:
                    mem = pred_mem(job, capacity)
                    if mem >= failed.limit(job.gpus):
                        continue
                    fit = free_fit(view, vc, job) or place(view, vc, job)
                    if fit.status is not _FITS:
                        failed.add(job.gpus, mem)
                        grown = True
                        if out is not None and mem == job.pred_gpu_mem_mib:
                            out.add(job.gpus, mem)
                        continue
                else:
                    fit = place(view, vc, job)
                if fit.status is _FITS:
                    if carried is None:
                        yield Start(job, fit.placement, fit.shared)
                        continue
                    key = started[job] = _wait_order(job)  # before the start moves its wait
                    yield Start(job, fit.placement, fit.shared)
                    if gains.mark(vc.vid) != mark:
                        # room was gained during the pass (e.g. a prediction corrected at a start):
                        # what failed in earlier passes may fit now. Go on as a pass that carried
                        # nothing would: with what it had found failing so far, the round's rest too.
                        failed = _failed_so_far([seq[starts[x]:starts[x + 1]] for x in range(r + 1)],
                                                started, free0, share, capacity)
                        carried = out = None
                        batch = sorted((j for j in seq[starts[r]:end] if j not in started and _wait_order(j) > key),
                                       key=_wait_order)
                        i = 0
                        grown = switched = True
                elif fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)
            if grown and (c < len(cand) or switched):  # switched: the carried failures no longer hold
                cand = todo.keep(end, failed)
                c = 0


def _requests(vc: VcState, pending: list[Job], queues: list[list[Job]], n: int) -> tuple | None:
    """GPUs and predicted memory of the first ``n`` pending jobs from the VC's queue, and a
    bound on their GPUs, when the pass takes them in queue order (one queue, not re-sorted);
    None otherwise. Read at the start of the pass: its starts leave the queue."""
    queue = vc.queue
    if not isinstance(queue, RequestQueue) or len(queues) != 1 or queues[0] is not pending or n < _VECTOR_FROM:
        return None
    gpus, mem = queue.requests()
    return gpus[:n], mem[:n], queue.most_gpus


class _Candidates:
    """Positions of a pass's jobs that may still fit, from one position on: a scan of the jobs'
    GPUs and predicted memory against the failures (numpy arrays for a long queue, taken from
    the queue's own arrays when given)."""

    __slots__ = ("capacity", "gpus", "jobs", "mem", "top")

    def __init__(self, jobs: list[Job], capacity: float, requests: tuple | None = None) -> None:
        self.jobs = jobs
        self.capacity = capacity
        self.gpus = self.mem = None
        self.top = 0  # at least the most GPUs a job asks for
        if requests is not None:
            self._read(*requests)

    def keep(self, start: int, failed: FailedFits | None) -> list[int]:
        jobs = self.jobs
        n = len(jobs)
        if failed is None or not failed.least:
            return list(range(start, n))
        if n - start < _VECTOR_FROM:
            capacity, known, limit = self.capacity, failed._limit, failed.limit
            out = []
            for q in range(start, n):
                job = jobs[q]
                m = job.pred_gpu_mem_mib
                if m != m:  # noqa: PLR0124 - NaN: no prediction
                    m = capacity
                b = known.get(job.gpus)
                if b is None:
                    b = limit(job.gpus)
                if not m >= b:
                    out.append(q)
            return out
        if self.gpus is None:
            gpus = np.fromiter(map(_gpus_of, jobs), np.int64, n)
            self._read(gpus, np.fromiter(map(_mem_of, jobs), float, n), int(gpus.max()))
        lim = failed.limits(self.top)[self.gpus[start:]]  # NaN: nothing failed with as few GPUs
        fail = self.mem[start:] >= lim  # False against NaN (no warning in numpy 2; not checked on 1.26)
        return ((~fail).nonzero()[0] + start).tolist()

    def _read(self, gpus: np.ndarray, mem: np.ndarray, top: int) -> None:
        """Take the jobs' GPUs, predicted memory (a job without a prediction needs a whole GPU)
        and the most GPUs any of them asks for, or more."""
        mem[np.isnan(mem)] = self.capacity
        self.gpus, self.mem, self.top = gpus, mem, top


def _still_failing(failed: FailedFits, view: ClusterView, vc: VcState, nodes: set[int], share: bool) -> FailedFits | None:
    """The failures of ``failed`` that still hold after stops freed room on ``nodes`` alone
    (elsewhere room only shrank since). A job of ``g`` GPUs and predicted memory ``m`` fits when
    the VC has ``g`` free GPUs (the gang stage spans nodes) or one node has ``g`` GPUs with room
    for it (free ones, and with sharing the shared ones whose memory left by the holders'
    predictions is at least ``m``, summed as :meth:`PlacementPipeline.room` sums it)."""
    rooms = []  # per node: its free GPUs and the memory left on each shared GPU
    for node in nodes:
        room = view.room_mask(node) if share else (view.room_mask(node) & ~view.node_mask[node])
        shared = room & view.node_mask[node]
        lefts = []
        if shared:
            capacity = view.node_mem[node]
            lefts = [capacity - u for u in shared_gpu_use(view, node, shared).values()]
        rooms.append(((room & ~shared).bit_count(), lefts))
    free = vc.free
    kept = FailedFits()
    for g, m in failed.least.items():
        if free < g and all(n + sum(1 for left in lefts if not left < m) < g for n, lefts in rooms):
            kept.least[g] = m
    return kept if kept.least else None


def _failed_so_far(seen: list[list[Job]], started: dict[Job, tuple[float, int]], free: int, share: bool,
                   capacity: float) -> FailedFits:
    """The failures a pass that carried nothing had recorded by now: every job of the rounds
    ``seen`` up to the latest start that was tried (not skipped for want of free GPUs without
    sharing) and did not start -- a job is recorded, or already dominated by one that was."""
    own = FailedFits()
    last = next(reversed(started))
    for raw in seen:
        for job in sorted(raw, key=lambda j: started.get(j) or _wait_order(j)):
            if not share and job.gpus > free:
                continue
            if job in started:
                free -= job.gpus
                if job is last:
                    return own
            else:
                own.add(job.gpus, pred_mem(job, capacity))
    return own


class HorusFairPolicy(HorusPolicy):
    """Horus-f: Horus with k = 3 job queues (fairer waiting across job classes)."""

    name = "horus-f"
    queues_k = 3
