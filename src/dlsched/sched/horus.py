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
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import numpy as np

from dlsched.core.job import Job
from dlsched.kernel.decisions import Decision, Postpone, Start, Status
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import VcState
from dlsched.kernel.view import SchedulingView
from dlsched.sched.kmeans import l1_kmeans
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.sharing.load import FULL_UTIL, pred_mem, pred_util

_FITS, _POSTPONE = Status.FITS, Status.POSTPONE


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


def _median(values: list[float]) -> float:
    """``float(np.median(values))`` without numpy's per-call overhead (same value: the middle
    element, or the mean of the two middle ones)."""
    values.sort()
    n = len(values)
    mid = n // 2
    if n % 2:
        return values[mid]
    return (values[mid - 1] + values[mid]) / 2


class HorusPolicy(OrderingPolicy):
    """Horus: k-means job queues, weighted-fair rounds of beta jobs, Eq. 7-10 cost placement."""

    name = "horus"
    default_placement = "horus-cost"
    queues_k = 1

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

    def new_queue(self) -> ArrivalQueue:
        return ArrivalQueue()

    def features(self, jobs: list[Job], vc: VcState, capacity: float) -> np.ndarray:
        """Per job: tasks, predicted utilisation, GPUs per task, predicted memory (Horus §4.2.2)."""
        per_node = max(1, vc.max_node_gpus)
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
        labels = l1_kmeans(self.features(jobs, vc, capacity), self.k)
        out: list[list[Job]] = [[] for _ in range(int(labels.max()) + 1)]
        for job, label in zip(jobs, labels.tolist()):
            out[label].append(job)
        return [q for q in out if q]

    def _free_fit(self):
        """The cost placement's exact shortcut for a job some node can take on free GPUs, when
        the placement is that scorer alone (no other scorer, filter or permit could differ)."""
        placer = self.placer
        scorers = getattr(placer, "scorers", ())
        if len(scorers) == 1 and not placer.filters and not placer.permits and hasattr(scorers[0][0], "free_fit"):
            return scorers[0][0].free_fit
        return None

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterator[Decision]:
        pending = list(vc.queue)
        if not pending:
            return
        state, now = view.state, view.now
        capacity = state.node_mem[vc.nodes[0]] if vc.nodes else 0.0
        queues = self.queues(pending, vc, capacity)
        medians = [_median([j.queue_delay + now - j.wait_since for j in q]) for q in queues]
        share = getattr(self.placer, "share", False) and state.cap > 1
        place = self.placer.place
        free_fit = self._free_fit()
        failed: list[tuple[int, float]] = []  # (GPUs, predicted memory) of jobs that did not fit this pass
        pos = [0] * len(queues)
        left = self.rounds if self.rounds is not None else -1
        while left:
            left -= 1
            lengths = [len(q) - p for q, p in zip(queues, pos)]
            if not any(lengths) or (vc.free == 0 and not (share and vc.share_nodes)):
                return
            weights = [max(n, med * n) for n, med in zip(lengths, medians)]
            batch: list[Job] = []
            for x, n in enumerate(allot(weights, lengths, self.beta)):
                batch.extend(queues[x][pos[x]:pos[x] + n])
                pos[x] += n
            batch.sort(key=lambda j: (j.wait_since - j.queue_delay, j.enq_seq))
            for job in batch:
                if not share and job.gpus > vc.free:
                    continue
                if free_fit is not None:
                    # the cost placement alone: fitting depends only on GPUs and predicted memory, and
                    # starts only take room away, so a job needing at least what failed fails too
                    mem = pred_mem(job, capacity)
                    if any(job.gpus >= g and mem >= m for g, m in failed):
                        continue
                    fit = free_fit(view, vc, job) or place(view, vc, job)
                    if fit.status is not _FITS:
                        failed.append((job.gpus, mem))
                        continue
                else:
                    fit = place(view, vc, job)
                if fit.status is _FITS:
                    yield Start(job, fit.placement, fit.shared)
                elif fit.status is _POSTPONE:
                    yield Postpone(job, fit.reason)


class HorusFairPolicy(HorusPolicy):
    """Horus-f: Horus with k = 3 job queues (fairer waiting across job classes)."""

    name = "horus-f"
    queues_k = 3
