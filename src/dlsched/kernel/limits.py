"""A job's max runtime (``Job.time_limit_s``): its clock, and the arming of its timer at start.

The limit counts **run time**: the seconds the job has held its GPUs over all its runs (what an
evicted or crashed run attained, plus the current run). Waiting in the queue, between an eviction
and the restart, does not count; a restart's redone checkpoint overhead does (the job runs then).
At each start :class:`LimitClock` arms a ``Timer(("limit", job_id))`` for exactly the run time
left; when it fires, :meth:`dlsched.kernel.entry.Kernel.on_timer` kills the job
(``StopReason.TIME_LIMIT``) if :func:`over_limit` holds, so a timer of an earlier run (the job was
evicted, then restarted with time left) changes nothing and needs no cancelling.
"""

from __future__ import annotations

from collections.abc import Callable

from dlsched.core.job import Job, JobState
from dlsched.kernel.stimuli import LIMIT_TIMER

_RUNNING = JobState.RUNNING
TOLERANCE_S = 1e-6   # rounding allowed at the limit: the timer is set for exactly the time left


def run_time(job: Job, now: float) -> float:
    """Seconds ``job`` has run over all its runs by ``now``: the runs cut short (``attained``
    GPU-seconds over its GPUs) plus the current run."""
    before = job.attained / job.gpus if job.gpus else 0.0
    return before + (now - job.run_since if job.state is _RUNNING else 0.0)


def over_limit(job: Job, now: float) -> bool:
    """Whether ``job`` has run its ``time_limit_s`` by ``now`` (False without a limit)."""
    limit = job.time_limit_s
    return limit is not None and run_time(job, now) >= limit - TOLERANCE_S


class LimitClock:
    """A kernel observer that arms each limited job's timer when it starts: ``arm(time, key,
    job)`` with ``key = ("limit", job_id)`` (the simulator pushes a heap event; a live driver
    would keep a timer). Installed only when some job has a limit: other runs pay nothing."""

    __slots__ = ("arm",)

    def __init__(self, arm: Callable[[float, tuple, Job], None]) -> None:
        self.arm = arm

    def started(self, job: Job, vc, now: float) -> None:
        limit = job.time_limit_s
        if limit is not None:   # told before the start: the earlier runs are in ``attained``
            before = job.attained / job.gpus if job.gpus else 0.0
            self.arm(now + max(limit - before, 0.0), (LIMIT_TIMER, job.job_id), job)
