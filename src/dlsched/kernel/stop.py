"""Why a job stopped holding its GPUs: one enum instead of strings spread over the observers.

A :class:`StopReason` is a ``str`` enum whose values are the words the kernel told its observers
before it existed (``"finish"``, ``"preempt"``, ``"fail"``, ``"forget"``), so an observer, a log
line or a results file that writes or compares the text gets the very same bytes; new code
compares members (``why is StopReason.FINISHED``). The failure's own text (``job.last_failure``,
e.g. ``"out of memory on GPU 0 ..."``) stays a sentence: :data:`OOM_PREFIX` is how it starts for
an out-of-memory crash.
"""

from __future__ import annotations

from enum import StrEnum


class StopReason(StrEnum):
    """Why ``ClusterState`` stops a job (the ``why`` of an observer's ``stopped``)."""

    FINISHED = "finish"        # it completed: it will not run again
    PREEMPTED = "preempt"      # evicted (by its policy or a reclaim): it queues again with its work
    FAILED = "fail"            # it crashed (e.g. out of memory): it queues again, the attempt counted
    FORGOTTEN = "forget"       # an assumed start was undone (the bind failed): as if it never started
    TIME_LIMIT = "time_limit"  # it ran up to its max runtime (``Job.time_limit_s``) and was killed


OOM_PREFIX = "out of memory"
"""How the failure text of an out-of-memory crash begins (``models/failure.py`` writes it)."""

FINAL = frozenset({StopReason.FINISHED, StopReason.TIME_LIMIT})
"""The stops after which the job never runs again (an observer drops what it kept for the job)."""
