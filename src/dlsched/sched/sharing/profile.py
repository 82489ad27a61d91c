"""A job as an interference model's :class:`JobProfile`, from its predictions.

The profile type lives in :mod:`dlsched.core.colocation`, so ``dlsched simulate`` does not load
the predictors package to name it.
"""

from __future__ import annotations

from dlsched.core.colocation import JobProfile
from dlsched.core.job import Job


def predicted_profile(job: Job) -> JobProfile:
    """What a policy may know of a job running alone: its model and *predicted* resource use."""
    return JobProfile(job.model_name, job.pred_gpu_util, job.pred_gpu_mem_mib, job.batch_size)
