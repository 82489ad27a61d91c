"""SRTF on *predicted* remaining time: preemptive, not an oracle, with the preemption guards.

SRTF (``sched/policies/srtf.py``) ranks jobs by their true remaining time, which no live scheduler knows.
This policy ranks them by what a scheduler can know: a job's predicted duration minus the
service it has attained (seconds it has run, over all its stints), floored at 0 -- a job that
outlived its prediction ranks first and is not evicted. The pass (greedy cut of the VC's GPU
quota, evictions of running jobs that fall outside it, guards) is SRTF's.

* ``source="estimator"`` (default): QSSF's online duration estimator
  (:class:`~dlsched.predictors.duration.online.OnlineDurationEstimator`, learning only from jobs
  finished before now; needs the ``ml`` extra), asked once when the job is submitted; the
  estimate is stored in ``job.pred_duration`` as QSSF does (start-time estimates read it).
* ``source="job"``: the job's own ``pred_duration`` (a trace column or a predictor's output);
  a job without one is refused before the run.

Attained service is read from the kernel's public bookkeeping, never from truth: a running job
has run ``now - submit_time - queue_delay`` seconds, a pending one ``wait_since - submit_time -
queue_delay`` once it has started (the queue delay sums every wait). A failed attempt's time
counts as attained although its work was lost.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from dlsched.core.job import Job, JobState
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.policies.srtf import SrtfPolicy
from dlsched.sched.preemption import GUARD_HELP, check_guards

SOURCES = ("estimator", "job")
_HOLDING = (JobState.RUNNING, JobState.ASSUMED)


@dataclass(frozen=True, slots=True)
class SrtfPredParams:
    """Where predicted durations come from, and the preemption guards. (The estimator runs with
    QSSF's default ``lam`` and ``refit_every``; they are not fields here, so ``--lam`` stays
    QSSF's alone.)"""

    source: str = field(default="estimator", metadata={"help": "srtf-pred: where predicted durations come from: "
                                                               "estimator (QSSF's online one) or job (the "
                                                               "trace's pred_duration)."})
    # -- preemption guards (sched/preemption.py) -----------------------------------------
    min_run_s: float = field(default=0.0, metadata={"help": GUARD_HELP["min_run_s"]})
    max_evictions: int | None = field(default=None, metadata={"help": GUARD_HELP["max_evictions"]})
    grace_s: float = field(default=0.0, metadata={"help": GUARD_HELP["grace_s"]})
    # -- end of preemption guards ----------------------------------------------------------

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise ValueError(f"--param source must be one of {', '.join(SOURCES)}, got {self.source!r}")
        check_guards(self.min_run_s, self.max_evictions, self.grace_s)


def attained(job: Job, now: float) -> float:
    """Seconds ``job`` has run so far, over all its stints (kernel bookkeeping only)."""
    if job.state in _HOLDING:  # running (or assumed, live) since its last start
        return now - job.submit_time - job.queue_delay
    if job.start_time < 0.0:
        return 0.0
    return job.wait_since - job.submit_time - job.queue_delay


class SrtfPredPolicy(SrtfPolicy):
    """Shortest *predicted* remaining time first, preemptive, with guards."""

    name = "srtf-pred"
    oracle = False
    Params = SrtfPredParams

    @staticmethod
    def from_params(params: SrtfPredParams, context) -> dict:
        """Constructor options: the fields, plus the trace's origin for the estimator's calendar."""
        return {"source": params.source, "min_run_s": params.min_run_s, "max_evictions": params.max_evictions,
                "grace_s": params.grace_s, "origin": context.origin}

    def __init__(self, placer, backfill: bool = False, source: str = "estimator", lam: float = 0.1,
                 refit_every: float = 86400.0, min_run_s: float = 0.0, max_evictions: int | None = None,
                 grace_s: float = 0.0, origin=None, estimator=None) -> None:
        SrtfPredParams(source, min_run_s, max_evictions, grace_s)  # the same checks
        super().__init__(placer, backfill, min_run_s, max_evictions, grace_s)
        self.source = source
        self.estimator = None
        if source == "estimator":
            if estimator is None:
                from dlsched.predictors.duration.online import OnlineDurationEstimator

                estimator = OnlineDurationEstimator(refit_every=refit_every, lam=lam, origin=origin)
            self.estimator = estimator
        else:
            self.job_submitted = self.job_finished = None  # nothing to learn: the engine skips the hooks

    # -- hooks --------------------------------------------------------------------------------
    def prepare(self, view: ClusterView) -> None:
        super().prepare(view)
        if self.estimator is not None:
            self.estimator.reset()

    def validate_trace(self, jobs: list[Job]) -> None:
        """With ``source="job"`` every job needs a predicted duration."""
        if self.source == "job":
            missing = [j.job_id for j in jobs if not j.pred_duration >= 0]
            if missing:
                raise ValueError(f"srtf-pred with source=job needs every job's pred_duration; {len(missing)} of "
                                 f"{len(jobs)} jobs have none (e.g. {missing[:3]})")

    def job_submitted(self, job: Job, now: float) -> None:
        self.estimator.estimate(job, now)  # -> job.pred_duration

    def job_finished(self, job: Job, now: float) -> None:
        self.estimator.observe_finished(job, now)

    # -- the rank -------------------------------------------------------------------------------
    def pending_order(self, view: ClusterView, vc: VcState) -> list[Job]:
        now = view.now
        return [c[3] for c in sorted((_left(j, now), 0, j.enq_seq, j) for j in vc.queue)]

    def candidates(self, view: ClusterView, vc: VcState) -> list[tuple[float, int, int, Job]]:
        now = view.now
        cands = [(_left(j, now), 0, j.enq_seq, j) for j in vc.queue]
        cands.extend((_left(j, now), 1, j.run_seq, j) for j in vc.running)
        cands.sort()
        return cands

    def pending_key(self, now: float):
        """A pending job's rank key, fixed while it waits: its prediction minus the service it
        attained in earlier stints (a waiting job attains none)."""
        return lambda job: _left(job, now)

    def running_ranked(self, view: ClusterView, vc: VcState) -> list[tuple[float, int, int, Job]]:
        now = view.now
        return sorted((_left(j, now), 1, j.run_seq, j) for j in vc.running)


def _left(job: Job, now: float) -> float:
    """Predicted remaining seconds: prediction minus attained service, at least 0."""
    left = job.pred_duration - attained(job, now)
    return left if left > 0.0 else (0.0 if not math.isnan(left) else math.inf)
