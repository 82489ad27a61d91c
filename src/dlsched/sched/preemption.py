"""Preemption guards shared by the preemptive policies (SRTF, SRTF-pred, PAB).

Users who checkpoint training state ask for three protections (KAI, Volcano):

* ``min_run_s``: a job that has run less than this since its **last start** is not evicted
  (it would lose the work of a checkpoint interval it has not reached). The policy asks for a
  pass at the moment the protection ends (``view.wake_at``), so a waiting job is not stuck
  until the next arrival or finish.
* ``max_evictions``: a job already evicted this many times (``job.preemptions``, the kernel's
  count) is not evicted again; ``None`` = no cap.
* ``grace_s``: the live grace period between the eviction request and the kill, in which the
  job writes its checkpoint. The simulator releases the GPUs at the decision and charges the
  evicted job ``max(preemption_overhead(job), grace_s)`` extra seconds of work on restart
  (:meth:`EvictionGuard.overhead`): a checkpoint that may take the whole grace period costs at
  least that much, and the run's own overhead (Helios's 7/30/60 s, or ``--preemption-overhead``)
  still applies when it is larger.

The defaults (0, None, 0) change nothing: the policies then decide exactly as without guards.

:class:`EvictionGuard` is the run-time side: it remembers when the policy started each job,
answers whether a running job is protected, turns an eviction into a :class:`Preempt` that says
why and for whom, and counts evictions and refusals for the run's summary (``SimResult.extra``).
"""

from __future__ import annotations

import math
from collections.abc import Callable

from dlsched.core.job import Job
from dlsched.kernel.decisions import Preempt

MIN_RUN, CAP = "min_run", "cap"

#: the guards' flag help (``metadata["help"]`` of each preemptive policy's guard fields)
GUARD_HELP = {
    "min_run_s": "Preemptive policies: a job that has run less than this many seconds since its last start "
                 "is not evicted.",
    "max_evictions": "Preemptive policies: a job evicted this often is not evicted again (default: no cap).",
    "grace_s": "Preemptive policies: seconds between an eviction request and the kill, for a checkpoint; "
               "the simulator charges at least this on restart.",
}


def check_guards(min_run_s: float, max_evictions: int | None, grace_s: float) -> None:
    """The guard values a Params dataclass accepts (ValueError naming the ``--param``)."""
    if not (math.isfinite(min_run_s) and min_run_s >= 0):
        raise ValueError(f"--param min_run_s must be a finite number >= 0 seconds, got {min_run_s}")
    if max_evictions is not None and max_evictions < 0:
        raise ValueError(f"--param max_evictions must be >= 0 (or none for no cap), got {max_evictions}")
    if not (math.isfinite(grace_s) and grace_s >= 0):
        raise ValueError(f"--param grace_s must be a finite number >= 0 seconds, got {grace_s}")


class EvictionGuard:
    """Who may be evicted now, and the counts of what was evicted or refused."""

    __slots__ = ("min_run_s", "max_evictions", "grace_s", "active", "started_at", "evictions",
                 "refused_min_run", "refused_cap", "_refused", "_asked")

    def __init__(self, min_run_s: float = 0.0, max_evictions: int | None = None, grace_s: float = 0.0) -> None:
        check_guards(min_run_s, max_evictions, grace_s)
        self.min_run_s = float(min_run_s)
        self.max_evictions = max_evictions
        self.grace_s = float(grace_s)
        # False: every running job may be evicted (the policies keep their unguarded fast path)
        self.active = self.min_run_s > 0 or max_evictions is not None
        self.started_at: dict[Job, float] = {}
        self.reset()

    def reset(self) -> None:
        """Before a run (a policy object may simulate more than once)."""
        self.started_at.clear()
        self.evictions = 0
        self.refused_min_run = 0      # running stints a pass wanted to evict before min_run_s
        self.refused_cap = 0          # running stints a pass wanted to evict past max_evictions
        self._refused: dict[Job, tuple[int, str]] = {}  # job -> (run_seq, why) last counted
        self._asked: dict[Job, int] = {}  # job -> run_seq of the stint whose eviction was decided

    def started(self, job: Job, now: float) -> None:
        """The policy starts ``job`` at ``now`` (only needed while ``min_run_s`` > 0)."""
        self.started_at[job] = now

    def protected_until(self, job: Job) -> float:
        """When ``job``'s minimum run time ends. The policy's own record of its start; a job it
        did not start (e.g. a restarted live service) falls back on ``run_since``, which is at
        or after the last start, so the fallback protects rather than evicts."""
        return self.started_at.get(job, job.run_since) + self.min_run_s

    def protection(self, job: Job, now: float) -> str | None:
        """Why running ``job`` may not be evicted at ``now`` (``"cap"``, ``"min_run"``), or None."""
        cap = self.max_evictions
        if cap is not None and job.preemptions >= cap:
            return CAP
        if self.min_run_s > 0 and now < self.protected_until(job):
            return MIN_RUN
        return None

    def refuse(self, job: Job, why: str) -> bool:
        """A pass wanted to evict protected ``job``: counted once per stint and reason (True the
        first time, when a policy asks for its wake-up)."""
        key = (job.run_seq, why)
        if self._refused.get(job) == key:
            return False
        self._refused[job] = key
        if why == CAP:
            self.refused_cap += 1
        else:
            self.refused_min_run += 1
        return True

    def evict(self, job: Job, reason: str, for_job: Job | None = None) -> Preempt | None:
        """The decision that evicts ``job`` (counted), saying why and for whom; None when this
        stint's eviction was already decided. (Live, an eviction is a request: the job runs on
        until its pod is gone, and a later pass must not ask again. In the simulator the job is
        stopped at once, so this never happens there.)"""
        seq = job.run_seq
        if self._asked.get(job) == seq:
            return None
        self._asked[job] = seq
        self.evictions += 1
        return Preempt(job, reason, for_job)

    def overhead(self, base: Callable[[Job], float] | None) -> Callable[[Job], float] | None:
        """The simulator's preemption overhead under this guard: ``max(base(job), grace_s)``
        (``base`` itself when there is no grace period, so default runs are unchanged)."""
        grace = self.grace_s
        if grace <= 0:
            return base
        if base is None:
            return lambda job: grace
        return lambda job: max(base(job), grace)

    def summary(self) -> dict[str, int | float]:
        """The counts for summary.json."""
        return {"evictions": self.evictions, "evictions_refused_min_run": self.refused_min_run,
                "evictions_refused_cap": self.refused_cap}
