"""The duration a finished job reveals to the estimators that learn from it.

A trace's job carries its recorded duration, which the simulator reveals when the job finishes
(:func:`dlsched.core.truth.revealed_duration`: a per-job check -- asking for a job that has not
finished raises :class:`~dlsched.core.job.OracleAccessError`, whatever runs). A live job has none
(its pod just ran until it ended): what the cluster knows is the time it held its GPUs
(``job.attained_at``: the runs the kernel booked at preempt and fail, plus the last run, to its
end). Estimators read this one function on finish, so the live service never has to write a
job's ground-truth slots to teach them. This module is the predictors' only way to the truth
module (the listed exception in ``tests/test_truth_access.py``); jobs that finished before a run
(history to prime or fit on) come with their recorded durations from the caller.
"""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.core.truth import revealed_duration


def observed_duration(job: Job) -> float:
    """Seconds the finished ``job`` is known to have needed: its recorded duration where it has
    one, else the wall-clock time it ran (attained GPU-seconds over its GPUs). Raises
    :class:`~dlsched.core.job.OracleAccessError` for a job that has not finished."""
    d = revealed_duration(job)
    if d == d:
        return float(d)
    return job.attained_at(job.end_time) / job.gpus if job.gpus > 0 else 0.0
