"""Quasi-Shortest-Service-First (Helios §4.2): per-VC queues ordered by predicted GPU time.

Priority = GPUs x expected duration, from either
* a priority file (``job id -> expected duration``, e.g. the Helios reference's
  ``input_qssf_priority_Philly_lgb.csv.gz``; multiplied by the job's GPUs as the reference
  does), or
* the online estimator (:class:`~dlsched.predictors.duration.online.OnlineDurationEstimator`),
  which learns only from jobs that finished before the current simulated time.
Non-preemptive, no backfill by default; placement is any placer (consolidate by default). QSSF
is only an ordering key: the pass itself is :class:`~dlsched.sched.ordering.OrderingPolicy`'s.

``helios_quirks=True`` (set by ``--compat helios``) reproduces the reference's ordering: at a
scheduling instant, jobs are first sorted by GPU count; only if the queue holds more than the
jobs that arrived at this instant do the queued jobs get (once) a priority and the queue is
re-sorted by it. Otherwise each job gets its priority when it is submitted.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.job import Job
from dlsched.kernel.queues import KeyedQueue
from dlsched.kernel.view import ClusterView
from dlsched.sched.ordering import OrderingPolicy


class HeliosQssfQueue:
    """The reference's persistent queue list: re-sorted in place (stable) at each pass; jobs get
    a priority only once the queue holds more than this instant's arrivals."""

    __slots__ = ("jobs", "new", "gpus", "assign")

    def __init__(self, assign) -> None:
        self.jobs: list[Job] = []
        self.new = 0     # jobs pushed since the last pass (arrivals at this instant)
        self.gpus = 0
        self.assign = assign

    def push(self, job: Job) -> None:
        self.jobs.append(job)
        self.new += 1
        self.gpus += job.gpus

    def remove(self, job: Job) -> None:
        self.jobs.remove(job)
        self.gpus -= job.gpus

    def head(self) -> Job | None:
        return self.jobs[0] if self.jobs else None

    def pass_order(self, now: float) -> list[Job]:
        jobs = self.jobs
        new, self.new = self.new, 0
        jobs.sort(key=lambda j: j.gpus)
        if len(jobs) > new:
            for job in jobs:
                if math.isnan(job.priority):
                    self.assign(job, now)
            jobs.sort(key=lambda j: j.priority)
        return list(jobs)

    def __len__(self) -> int:
        return len(self.jobs)

    def __iter__(self):
        return iter(list(self.jobs))


def check_priorities(priorities: dict[str, float], jobs: list[Job]) -> None:
    """Before a run: every job must have an entry in the priority file (checked by the caller,
    which knows the whole trace; the policy itself never sees future jobs)."""
    missing = [j.job_id for j in jobs if j.job_id not in priorities]
    if missing:
        raise ValueError(f"the priority file has no entry for {len(missing)} of {len(jobs)} jobs "
                         f"(e.g. {missing[:3]}); its keys must be the trace's job ids")


@dataclass(frozen=True, slots=True)
class QssfParams:
    """QSSF's options: the online estimator's weight and refit period, or a priority file."""

    lam: float = field(default=0.1, metadata={"help": "QSSF: weight of the rolling estimate P_R (1-lam on the GBDT)."})
    refit_every: float = field(default=86400.0,
                               metadata={"help": "QSSF: refit the GBDT every this many simulated s."})
    priority_file: Path | None = field(default=None, metadata={
        "help": "QSSF: external priorities (job id/jobname,priority)."})

    def __post_init__(self) -> None:
        if not 0 <= self.lam <= 1:
            raise ValueError(f"--lam must be between 0 and 1, got {self.lam}")
        if not (self.refit_every > 0 and math.isfinite(self.refit_every)):
            raise ValueError(f"--refit-every must be a finite number > 0 seconds, got {self.refit_every}")


class QssfPolicy(OrderingPolicy):
    name = "qssf"
    Params = QssfParams

    @staticmethod
    def from_params(params: QssfParams, context) -> dict:
        """Constructor options: the priority file loaded, or the estimator's knobs; the Helios
        quirks with ``--compat helios``; the trace's origin for calendar features."""
        opts: dict = {"helios_quirks": context.compat == "helios"}
        if params.priority_file is not None:
            from dlsched.predictors.duration.priority import load_priority_file

            opts["priorities"] = load_priority_file(params.priority_file)
        else:
            opts.update(lam=params.lam, refit_every=params.refit_every, origin=context.origin)
        return opts

    def validate_trace(self, jobs: list[Job]) -> None:
        """Called by the runner before a run: a priority file must cover every job."""
        if self.priorities is not None:
            check_priorities(self.priorities, jobs)

    def __init__(self, placer, backfill: bool = False, priorities: dict[str, float] | None = None,
                 estimator=None, helios_quirks: bool = False, lam: float = 0.1, refit_every: float = 86400.0,
                 origin=None) -> None:
        super().__init__(placer, backfill)
        self.priorities = priorities
        if priorities is None and estimator is None:
            from dlsched.predictors.duration.online import OnlineDurationEstimator

            estimator = OnlineDurationEstimator(refit_every=refit_every, lam=lam, origin=origin)
        self.estimator = None if priorities is not None else estimator
        self.helios_quirks = helios_quirks

    # -- hooks called by the backend --------------------------------------------------------
    def prepare(self, view: ClusterView) -> None:
        if self.estimator is not None:
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
            try:
                job.priority = self.priorities[job.job_id] * job.gpus
            except KeyError:
                raise ValueError(f"the priority file has no entry for job {job.job_id}") from None
            return job.priority
        return self.estimator.priority(job, now)

    def key(self, job: Job) -> float:
        return job.priority

    def new_queue(self):
        if self.helios_quirks:
            return HeliosQssfQueue(self._assign)
        return KeyedQueue(self.key)
