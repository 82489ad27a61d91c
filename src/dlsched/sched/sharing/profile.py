"""A job as an interference model's :class:`JobProfile`: predicted (any policy) or true (oracles).

The profile type is imported on first use: the registry lists the pairing policies, and
``dlsched simulate`` must not load the predictors package unless a run needs it.
"""

from __future__ import annotations

from functools import cache

from dlsched.core.job import Job


@cache
def _profile_type():
    from dlsched.predictors.interference.base import JobProfile

    return JobProfile


def predicted_profile(job: Job):
    """What a policy may know of a job running alone: its model and *predicted* resource use."""
    return _profile_type()(job.model_name, job.pred_gpu_util, job.pred_gpu_mem_mib, job.batch_size)


def true_profile(job: Job):
    """The measured profile (ground truth): for oracle policies only, which hold the grant."""
    return _profile_type()(job.model_name, job.gpu_util, job.gpu_mem_mib, job.batch_size)
