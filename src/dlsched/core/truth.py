"""Ground truth of a job, behind one door: this module.

A job's truth -- the true duration, the remaining run time, the measured GPU utilisation and
peak memory, the trace's final status -- is what the *simulated* backend runs the job by. It is
supplied where jobs are made (trace loaders, workloads: ``Job(..., duration=..., gpu_util=...)``),
run by :mod:`dlsched.sim` and its ground-truth models (:mod:`dlsched.models`), and read back by
metrics, result writers and experiments. Everyone of them goes through the names here; the job
itself has no public truth name (``job.duration`` and the like always raise
:class:`~dlsched.core.job.OracleAccessError`). The values stay in the job's slots (``_duration``,
``_remaining``, ``_start_remaining``, ``_measured``) because the engine's hot loop reads and
writes them on every start and finish; only this module, :mod:`dlsched.core.job`, the simulated
backend and the ground-truth models touch those slots by name (``tests/test_truth_access.py``).

Who may not come here at all: policies (``dlsched.sched``; an oracle policy reads its view's
truth grant), estimators (``dlsched.predictors``; they learn from :func:`revealed_duration`),
the kernel and the live service -- checked statically by the same test. One listed exception:
the estimators' :func:`revealed_duration` (a per-job check: only a finished job's run time). The
start-time forecast is the simulated backend run on a twin (``dlsched.sim.forecast``), whose
copies of the jobs get a *prediction* as their truth (:func:`forecast`, :mod:`dlsched.sim.twin`).

The readers are C ``attrgetter`` s: ``map(duration, jobs)`` costs what the slot read did.
"""

from __future__ import annotations

from collections.abc import Callable
from operator import attrgetter
from typing import Any

from dlsched.core.job import NO_MEASURE, Job, JobState, Measured, OracleAccessError, intern

__all__ = ["FIELDS", "MEASURED_SLOT", "duration", "field", "forecast", "gpu_mem_mib", "gpu_util", "measured", "remaining", "revealed_duration",
           "set_duration", "set_measured", "set_remaining", "status"]

_FINISHED = JobState.FINISHED

MEASURED_SLOT = "_measured"
"""The job slot that holds its :class:`~dlsched.core.job.Measured` record: a bulk loader
(:func:`dlsched.traces.pipeline.build_jobs`) fills it for a million jobs in one generated loop."""

duration: Callable[[Job], float] = attrgetter("_duration")
"""The job's true run time at solo speed (seconds; NaN: none known, e.g. a live job)."""
remaining: Callable[[Job], float] = attrgetter("_remaining")
"""Solo seconds left as of the job's last booking (``run_since`` while it runs; the simulated
backend's :meth:`~dlsched.sim.physics.Physics.remaining` gives it at a given time)."""
measured: Callable[[Job], Measured] = attrgetter("_measured")
"""The shared record of measured utilisation, peak memory and final status."""
gpu_util: Callable[[Job], float] = attrgetter("_measured.gpu_util")
"""Measured GPU utilisation (0-100; NaN: not measured)."""
gpu_mem_mib: Callable[[Job], float] = attrgetter("_measured.gpu_mem_mib")
"""Measured peak GPU memory (MiB; NaN: not measured)."""
status: Callable[[Job], str] = attrgetter("_measured.status")
"""The job's final status in its trace ("" when the trace has none)."""


FIELDS: tuple[str, ...] = ("duration", "remaining", "gpu_util", "gpu_mem_mib", "status")
"""The truth a job was made with or runs by, under the names a trace's columns use."""


def field(name: str) -> Callable[[Job], Any]:
    """A getter of the job field ``name``, a truth field (:data:`FIELDS`) read through this module:
    for writers and comparisons that sweep a trace's columns by name (e.g. the canonical CSV)."""
    return globals()[name] if name in FIELDS else attrgetter(name)


def set_duration(job: Job, seconds: float) -> None:
    """Give ``job`` a new true duration (a workload that rescales its trace); the remaining time
    follows at the next :meth:`~dlsched.core.job.Job.reset` (every simulation starts with one)."""
    job._duration = seconds


def set_measured(job: Job, **fields: Any) -> None:
    """Replace fields of ``job``'s measured record (``gpu_util``, ``gpu_mem_mib``, ``status``);
    the record stays shared with the jobs measured alike."""
    job._measured = intern(job._measured._replace(**fields))


def set_remaining(job: Job, seconds: float) -> None:
    """Book ``job``'s remaining solo seconds (the start-time estimate's forward run keeps the work
    a preempted copy did; the simulated backend writes its own slots in its hot loop)."""
    job._remaining = seconds


def forecast(twin: Job, seconds: float) -> None:
    """Make the prediction ``seconds`` the truth of ``twin``, a copy the start-time estimate runs
    forward (:mod:`dlsched.sim.forecast`): it runs exactly that long and has nothing measured. The
    original job's truth is neither read nor changed."""
    twin._duration = twin._remaining = twin._start_remaining = seconds
    twin._measured = NO_MEASURE


def revealed_duration(job: Job) -> float:
    """The run time ``job``'s finish revealed, for the estimators that learn from it: its recorded
    duration (NaN: none recorded, e.g. a live job -- see
    :func:`dlsched.predictors.duration.observed.observed_duration`). A per-job check: a job that
    has not finished reveals nothing, and asking raises :class:`OracleAccessError`."""
    if job.state is not _FINISHED:
        raise OracleAccessError(f"job {job.job_id} has not finished ({job.state.name}): its run time is "
                                "not known yet (estimators learn from finished jobs only)")
    return job._duration
