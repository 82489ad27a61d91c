"""Quasi-Shortest-Service-First (Helios §4.2): per-VC queues ordered by predicted GPU time.

Priority = GPUs x expected duration, from either
* a priority file (``job id -> expected duration``, e.g. the Helios reference's
  ``input_qssf_priority_Philly_lgb.csv.gz``; multiplied by the job's GPUs as the reference
  does), or
* the online estimator (:class:`~dlsched.predictors.duration.online.OnlineDurationEstimator`),
  which learns only from jobs that finished before the current simulated time.
Non-preemptive, no backfill by default; placement is any placer (consolidate by default).

``helios_quirks=True`` (set by ``--compat helios``) reproduces the reference's ordering: at a
scheduling instant, jobs are first sorted by GPU count; only if the queue holds more than the
jobs that arrived at this instant do the queued jobs get (once) a priority and the queue is
re-sorted by it. Otherwise each job gets its priority when it is submitted.
"""

from __future__ import annotations

import math
from typing import Iterator

from dlsched.core.job import Job
from dlsched.sim.decisions import Decision, Start
from dlsched.sim.queues import KeyedQueue
from dlsched.sim.state import VcState
from dlsched.sim.view import SchedulingView


class ArrivalSortedQueue:
    """The reference's persistent queue list: re-sorted in place (stable) at each pass."""

    __slots__ = ("jobs", "new", "gpus")

    def __init__(self) -> None:
        self.jobs: list[Job] = []
        self.new = 0     # jobs pushed since the last pass (arrivals at this instant)
        self.gpus = 0

    def push(self, job: Job) -> None:
        self.jobs.append(job)
        self.new += 1
        self.gpus += job.gpus

    def remove(self, job: Job) -> None:
        self.jobs.remove(job)
        self.gpus -= job.gpus

    def head(self) -> Job | None:
        return self.jobs[0] if self.jobs else None

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self):
        return iter(list(self.jobs))


class QssfPolicy:
    name = "qssf"
    oracle = False
    preemptive = False

    def __init__(self, placer, backfill: bool = False, priorities: dict[str, float] | None = None,
                 estimator=None, helios_quirks: bool = False, lam: float = 0.1, refit_every: float = 86400.0,
                 origin=None) -> None:
        self.placer = placer
        self.placement_name = placer.name
        self.backfill = backfill
        self.priorities = priorities
        if priorities is None and estimator is None:
            from dlsched.predictors.duration.online import OnlineDurationEstimator

            estimator = OnlineDurationEstimator(refit_every=refit_every, lam=lam, origin=origin)
        self.estimator = None if priorities is not None else estimator
        self.helios_quirks = helios_quirks

    # -- hooks called by the engine --------------------------------------------------------
    def prepare(self, view: SchedulingView, jobs: list[Job]) -> None:
        if self.priorities is not None:
            missing = [j.job_id for j in jobs if j.job_id not in self.priorities]
            if missing:
                raise ValueError(f"the priority file has no entry for {len(missing)} of {len(jobs)} jobs "
                                 f"(e.g. {missing[:3]}); its keys must be the trace's job ids")
        else:
            self.estimator.reset()

    def job_submitted(self, job: Job, now: float) -> None:
        if not self.helios_quirks:
            self._assign(job, now)

    def job_finished(self, job: Job, now: float) -> None:
        if self.estimator is not None:
            self.estimator.observe_finished(job, now)

    # -- ordering -------------------------------------------------------------------------
    def _assign(self, job: Job, now: float) -> float:
        if self.priorities is not None:
            job.priority = self.priorities[job.job_id] * job.gpus
            return job.priority
        return self.estimator.priority(job, now)

    def new_queue(self):
        if self.helios_quirks:
            return ArrivalSortedQueue()
        return KeyedQueue(lambda job: job.priority)

    def schedule(self, view: SchedulingView, vc: VcState) -> Iterator[Decision]:
        queue = vc.queue
        if self.helios_quirks:
            jobs = queue.jobs
            new, queue.new = queue.new, 0
            jobs.sort(key=lambda j: j.gpus)
            if len(jobs) > new:
                for job in jobs:
                    if math.isnan(job.priority):
                        self._assign(job, view.now)
                jobs.sort(key=lambda j: j.priority)
            order = list(jobs)
        elif self.backfill:
            order = list(queue)
        else:
            order = None
        place = self.placer.place
        if order is None:  # keyed queue, blocking: look at the head only
            while (job := queue.head()) is not None:
                placement = place(view, vc, job)
                if placement is None:
                    return
                yield Start(job, placement)
            return
        for job in order:
            placement = place(view, vc, job) if job.gpus <= vc.free else None
            if placement is None:
                if self.backfill:
                    continue
                return
            yield Start(job, placement)
