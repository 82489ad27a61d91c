"""Predictions corrected by observation: a prediction is a prior until the job has been watched.

Once a job has run ``warmup`` seconds without stopping, what a node agent measures — its GPU
utilisation and peak memory — replaces ``pred_gpu_util`` / ``pred_gpu_mem_mib`` for every later
decision (policies keep reading ``pred_*``); the replaced values stay in ``prior_gpu_util`` /
``prior_gpu_mem_mib`` and come back when the job list is reset for another run. In the simulator
the measurement is the job's ground truth (its utilisation and memory measured alone: a
per-process agent, e.g. DCGM or ``nvidia-smi pmon``, attributes them to the job even beside
co-runners); the live service will feed its node agent's readings through the same
:meth:`ObservedCorrection.correct`.

A kernel observer, no engine change: starts are noted, stops cancel the watch, and every
transition first applies the corrections that fell due at or before it. Every scheduling pass
follows a transition at its instant (a finish, a failure, an arrival), so no decision after a
due time sees the prior — except a pass woken by a policy timer alone, which sees it until the
next transition.

An out-of-memory crash is an observation too: the failure model reports, through the same
rule (:func:`dlsched.kernel.correction.observe`), the peak memory of the crashed job's co-runners whose prediction it showed too
low (:meth:`~dlsched.models.failure.OutOfMemory.failed`). Such a memory-only observation does not
end a job's watch: its utilisation is still observed after the warm-up.
"""

from __future__ import annotations

import heapq

from dlsched.core.job import Job
from dlsched.kernel.correction import observe
from dlsched.kernel.stop import FINAL, StopReason


class ObservedCorrection:
    """After ``warmup`` seconds of running, a job's observed utilisation and memory replace its
    predictions. ``corrected`` counts the jobs whose predictions were replaced."""

    def __init__(self, warmup: float) -> None:
        if not warmup >= 0:
            raise ValueError(f"--observe-after must be >= 0 seconds, got {warmup}")
        self.warmup = float(warmup)
        self.corrected = 0
        self._due: list[tuple[float, int, Job]] = []
        self._since: dict[Job, float] = {}
        self._cut: set[Job] = set()  # jobs stopped before their warm-up ended: watched again
        self._seq = 0
        self.state = None

    def attach(self, state) -> None:
        self.corrected, self._due, self._since, self._cut, self._seq = 0, [], {}, set(), 0
        self.state = state

    # -- observer callbacks (before each transition) -------------------------------------------
    def submitted(self, job: Job, vc, now: float) -> None:
        if self._due and self._due[0][0] <= now:
            self._apply(now)

    def started(self, job: Job, vc, now: float) -> None:
        if self._due and self._due[0][0] <= now:
            self._apply(now)
        if job.observed_at >= 0 and job not in self._cut:
            return  # observed before (it ran past the warm-up, then was preempted or failed)
        self._cut.discard(job)
        self._since[job] = now
        self._seq += 1
        heapq.heappush(self._due, (now + self.warmup, self._seq, job))

    def stopped(self, job: Job, vc, now: float, why: StopReason) -> None:
        if self._due and self._due[0][0] <= now:
            self._apply(now)
        # a stop before the warm-up ends: nothing was observed (a memory-only OOM observation aside)
        if self._since.pop(job, None) is not None and why not in FINAL:
            self._cut.add(job)  # it will run again: watch it again

    def node_changed(self, node: int, now: float) -> None:
        if self._due and self._due[0][0] <= now:
            self._apply(now)

    # -- corrections ---------------------------------------------------------------------------
    def _apply(self, now: float) -> None:
        due = self._due
        while due and due[0][0] <= now:
            t, _, job = heapq.heappop(due)
            since = self._since.get(job)
            if since is not None and since + self.warmup == t:
                del self._since[job]
                self.correct(job, job._measured.gpu_util, job._measured.gpu_mem_mib, t)

    def correct(self, job: Job, util: float, mem_mib: float, at: float) -> None:
        """Replace the job's predictions by values measured at time ``at`` (NaN: nothing was
        measured, that prediction stays)."""
        if observe(job, util, mem_mib, at, self.state):
            self.corrected += 1

    def summary(self, metrics) -> dict:
        return {"observe_after": self.warmup, "predictions_corrected": self.corrected}

