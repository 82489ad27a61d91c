"""What-if: the same state run forward under the current policy and under another one.

Both forward runs (:mod:`dlsched.sched.eta`) start from one copy of the same moment, with the
same predicted durations (one :class:`~dlsched.sched.eta.Calibration`, one fallback), so the
only difference between them is the policy (its queue order, placement, parameters). Per
waiting job: its estimated start under each and the difference (other - current; negative:
earlier under the other policy); per queue (VC) and overall: mean and median wait under each,
their change, and how many jobs start earlier, later or at the same time. A job that never
starts in one of the runs is counted apart and left out of the means.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from dlsched.kernel.state import ClusterState
from dlsched.sched.eta import EtaEstimator, EtaResult, ForwardRun


@dataclass(frozen=True, slots=True)
class JobWhatIf:
    """One waiting job: its estimated starts (absolute times; ``inf``: never in that run)."""

    job_id: str
    vc: str
    gpus: int
    submit_time: float
    current: float
    other: float

    @property
    def diff(self) -> float:
        """other - current in seconds (negative: it starts earlier under the other policy)."""
        if math.isinf(self.current) or math.isinf(self.other):
            return math.nan if self.current == self.other else (math.inf if math.isinf(self.other) else -math.inf)
        return self.other - self.current


@dataclass(slots=True)
class WhatIf:
    """The comparison at ``now``: one row per waiting job, in submission order."""

    now: float
    current_policy: str
    other_policy: str
    jobs: list[JobWhatIf] = field(default_factory=list)

    def summary(self, jobs: list[JobWhatIf] | None = None) -> dict:
        """Mean/median wait (start - submit, seconds) under each policy and their change; jobs
        earlier / later / same; jobs that never start under either run."""
        rows = self.jobs if jobs is None else jobs
        both = [j for j in rows if not math.isinf(j.current) and not math.isinf(j.other)]
        cur = [j.current - j.submit_time for j in both]
        oth = [j.other - j.submit_time for j in both]

        def stat(fn, xs):
            return fn(xs) if xs else None
        mean_c, mean_o = stat(statistics.fmean, cur), stat(statistics.fmean, oth)
        med_c, med_o = stat(statistics.median, cur), stat(statistics.median, oth)
        return {"jobs": len(rows), "compared": len(both),
                "mean_wait_current": mean_c, "mean_wait_other": mean_o,
                "mean_wait_change": None if mean_c is None else mean_o - mean_c,
                "median_wait_current": med_c, "median_wait_other": med_o,
                "median_wait_change": None if med_c is None else med_o - med_c,
                "earlier": sum(1 for j in both if j.other < j.current),
                "later": sum(1 for j in both if j.other > j.current),
                "same": sum(1 for j in both if j.other == j.current),
                "never_current": sum(1 for j in rows if math.isinf(j.current)),
                "never_other": sum(1 for j in rows if math.isinf(j.other))}

    def by_queue(self) -> dict[str, dict]:
        """:meth:`summary` per queue (VC), in the order the VCs first appear among the jobs."""
        groups: dict[str, list[JobWhatIf]] = {}
        for j in self.jobs:
            groups.setdefault(j.vc, []).append(j)
        return {vc: self.summary(rows) for vc, rows in groups.items()}

    def as_dict(self, names: dict[str, str] | None = None) -> dict:
        """JSON-ready (``inf`` -> None); ``names`` maps job ids to what to show (pod keys live)."""
        def t(x: float) -> float | None:
            return None if math.isinf(x) or math.isnan(x) else x
        return {"now": self.now, "current_policy": self.current_policy, "other_policy": self.other_policy,
                "summary": self.summary(), "queues": self.by_queue(),
                "jobs": [{"job": (names or {}).get(j.job_id, j.job_id), "vc": j.vc, "gpus": j.gpus,
                          "current": t(j.current), "other": t(j.other), "diff_s": t(j.diff)} for j in self.jobs]}


def other_estimator(base: EtaEstimator, policy) -> EtaEstimator:
    """An estimator for ``policy`` with ``base``'s durations (its predict, calibration, fallback,
    overrun, event bound and duration override), so that the two runs differ by policy alone.
    Each waiting copy goes through ``policy``'s submission hook (its own keys, from predictions)."""
    return EtaEstimator(policy, predict=base.predict, overrun=base.overrun, default_duration=base.default_duration,
                        max_events=base.max_events, duration_of=base.duration_of, calibration=base.calibration,
                        resubmit=True)


def snapshots(base: EtaEstimator, other_policy, state: ClusterState, now: float) -> tuple[ForwardRun, ForwardRun]:
    """The two copies (the caller may hold a lock for this part only)."""
    return base.snapshot(state, now), other_estimator(base, other_policy).snapshot(state, now)


def compare_runs(current: EtaResult, other: EtaResult, current_policy: str, other_policy: str) -> WhatIf:
    """The per-job table of two forward runs of the same moment."""
    out = WhatIf(current.now, current_policy, other_policy)
    for job in sorted(current.eta, key=lambda j: (j.enq_seq, j.job_id)):
        out.jobs.append(JobWhatIf(job.job_id, job.vc, job.gpus, job.submit_time, current.eta[job],
                                  other.eta.get(job, math.inf)))
    return out


def what_if(base: EtaEstimator, other_policy, state: ClusterState, now: float) -> WhatIf:
    """Both forward runs of ``state`` at ``now`` and their comparison (nothing of ``state`` changes)."""
    a, b = snapshots(base, other_policy, state, now)
    return compare_runs(a.run(), b.run(), base.policy.name, other_policy.name)
