"""The prediction-correction rule: a measurement replaces a job's predictions, the prior is kept.

One rule for every source of measurements: the simulator's warm-up observation
(:class:`~dlsched.sim.observe.ObservedCorrection`), the out-of-memory model's crash report
(:class:`~dlsched.models.failure.OutOfMemory`), a policy's failover (``OrderingPolicy.job_failed``)
and the live service's node agent (``SchedulerCore.observe``). It lives in the kernel so that
sched, models, sim and service can all apply it without importing each other; a running job's
correction is announced to the state's observers (``ClusterState.predictions_changed``), so
plug-in indexes that sum predicted load (the sharing load index, room gains) re-read it.
"""

from __future__ import annotations

import math

from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState


def observe(job: Job, util: float, mem_mib: float, at: float, state: ClusterState | None = None) -> bool:
    """Replace ``job``'s predictions by values measured at time ``at`` (NaN: not measured, that
    prediction stays); the first observation keeps the predictions as the priors that
    :meth:`Job.reset` restores. With ``state``, a running job's correction is announced to the
    state's observers. Returns whether anything was measured."""
    if math.isnan(util) and math.isnan(mem_mib):
        return False
    if job.observed_at < 0:
        job.prior_gpu_util, job.prior_gpu_mem_mib = job.pred_gpu_util, job.pred_gpu_mem_mib
    job.observed_at = at
    if not math.isnan(util):
        job.pred_gpu_util = float(util)
    if not math.isnan(mem_mib):
        job.pred_gpu_mem_mib = float(mem_mib)
    if state is not None and job.placement:
        state.predictions_changed(job)
    return True
