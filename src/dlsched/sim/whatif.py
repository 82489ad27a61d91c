"""What-if: the same state run forward under the current policy and queues and under another
policy, other queues (quotas), or both.

Both forward runs (:mod:`dlsched.sim.eta`, the engine on a twin: :mod:`dlsched.sim.forecast`) start from one copy of the same moment, with the
same predicted durations (one :class:`~dlsched.sim.eta.Calibration`, one fallback), so the
only difference between them is what was changed: the policy (its queue order, placement,
parameters) and/or the queues (the cluster file's ``[[queues]]``: borrow and lend limits,
cohorts, weights), "what if this queue ran under another policy or quota from now on?". The
current run uses the queues the state runs (its queue manager, fixed VCs without one); the
other run's queue manager starts from the same decayed usage and the same loans. Per
waiting job: its estimated start under each and the difference (other - current; negative:
earlier under the other policy); per queue (VC) and overall: mean and median wait under each,
their change, and how many jobs start earlier, later or at the same time. A job that never
starts in one of the runs is counted apart and left out of the means.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field

from dlsched.kernel.quotas import QueueSpec, borrowing_possible
from dlsched.kernel.state import ClusterState
from dlsched.sim.eta import EtaEstimator, EtaResult, ForwardRun


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
    other_queues: str | None = None     # what the other run changed in the queues (None: nothing)

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
                "other_queues": self.other_queues, "summary": self.summary(), "queues": self.by_queue(),
                "jobs": [{"job": (names or {}).get(j.job_id, j.job_id), "vc": j.vc, "gpus": j.gpus,
                          "current": t(j.current), "other": t(j.other), "diff_s": t(j.diff)} for j in self.jobs]}


def other_estimator(base: EtaEstimator, policy=None, queues: tuple[QueueSpec, ...] | None = None) -> EtaEstimator:
    """An estimator for ``policy`` (None: ``base``'s) and ``queues`` (None: ``base``'s) with
    ``base``'s durations (its predict, calibration, fallback, overrun, event bound, duration
    override and checkpoint overhead), so that the two runs differ by what was changed alone.
    Under another policy each waiting copy goes through its submission hook (its own keys, from
    predictions); under the same policy the copies keep the keys they were queued with, so a
    change of quotas alone compares like with like."""
    same = policy is None
    return EtaEstimator(base.policy if same else policy, predict=base.predict, overrun=base.overrun,
                        default_duration=base.default_duration, max_events=base.max_events,
                        duration_of=base.duration_of, calibration=base.calibration,
                        resubmit=base.resubmit if same else True,
                        queues=base.queues if queues is None else queues, half_life=base.half_life,
                        preemption_overhead=base.preemption_overhead)


def snapshots(base: EtaEstimator, other_policy, state: ClusterState, now: float,
              other_queues: tuple[QueueSpec, ...] | None = None) -> tuple[ForwardRun, ForwardRun]:
    """The two copies (the caller may hold a lock for this part only); ValueError when the other
    queues do not fit the state (a queue that names no VC, borrowing under a preemptive policy)."""
    return base.snapshot(state, now), other_estimator(base, other_policy, other_queues).snapshot(state, now)


def compare_runs(current: EtaResult, other: EtaResult, current_policy: str, other_policy: str,
                 other_queues: str | None = None) -> WhatIf:
    """The per-job table of two forward runs of the same moment."""
    out = WhatIf(current.now, current_policy, other_policy, other_queues=other_queues)
    for job in sorted(current.eta, key=lambda j: (j.enq_seq, j.job_id)):
        out.jobs.append(JobWhatIf(job.job_id, job.vc, job.gpus, job.submit_time, current.eta[job],
                                  other.eta.get(job, math.inf)))
    return out


def what_if(base: EtaEstimator, other_policy, state: ClusterState, now: float,
            other_queues: tuple[QueueSpec, ...] | None = None, queues_label: str | None = None) -> WhatIf:
    """Both forward runs of ``state`` at ``now`` and their comparison (nothing of ``state``
    changes). ``other_policy`` None: the current one; ``other_queues`` None: the current queues
    (at least one of the two should differ); ``queues_label`` says what the queues changed."""
    if other_queues is not None and queues_label is None:
        queues_label = describe_queues(other_queues)
    a, b = snapshots(base, other_policy, state, now, other_queues)
    other_name = base.policy.name if other_policy is None else other_policy.name
    return compare_runs(a.run(), b.run(), base.policy.name, other_name, queues_label)


def describe_queues(specs: tuple[QueueSpec, ...]) -> str:
    """One line for a queue configuration: each queue's limits (``A borrow 8 lend -``; ``-``: no
    limit), ``fixed VCs`` when none may borrow."""
    if not specs or not borrowing_possible(specs):
        return "fixed VCs (no queue borrows)"

    def limit(total, types) -> str:
        if types is not None:
            return "{" + ", ".join(f"{t}={n}" for t, n in types) + "}"
        return "-" if total is None else str(total)
    return "; ".join(f"{q.name} borrow {limit(q.borrow_limit, q.borrow_types)} lend {limit(q.lend_limit, q.lend_types)}"
                     + (f" in {q.parent}" if q.parent else "") + (f" weight {q.weight:g}" if q.weight != 1.0 else "")
                     for q in specs)


def never_why(state: ClusterState, job_id: str, vc_name: str, gpus: int) -> str:
    """Why a waiting job can never start on ``state``'s nodes, as far as its request shows: more
    GPUs than its VC has, or than its largest node (a pod runs on one node live); else that the
    forward run ended first."""
    vc = next((v for v in state.vcs if v.name == vc_name), None)
    if vc is None or vc.total_gpus == 0:
        return f"its VC {vc_name} has no nodes at this moment"
    if gpus > vc.total_gpus:
        return f"it needs {gpus} GPUs and its VC {vc_name} has {vc.total_gpus} in all"
    if gpus > vc.max_node_gpus:
        return (f"it needs {gpus} GPUs on one node (a pod runs on one) and the largest node of VC {vc_name} "
                f"has {vc.max_node_gpus}")
    return ("the forward run ended before it started (it fits its VC; the jobs ahead of it or on its nodes "
            "did not end in the run's bound of events)")


def never_reasons(state: ClusterState, result: WhatIf) -> dict[str, str]:
    """job id -> 'which run(s): why' for each job that never starts in the current run, the
    other run or both (the tables show ``never`` alone)."""
    out: dict[str, str] = {}
    for j in result.jobs:
        cur, oth = math.isinf(j.current), math.isinf(j.other)
        if not (cur or oth):
            continue
        runs = ("either run" if cur and oth else f"the {result.current_policy} run (recorded)" if cur
                else f"the {result.other_policy} run (other)")
        out[j.job_id] = f"{runs}: {never_why(state, j.job_id, j.vc, j.gpus)}"
    return out
