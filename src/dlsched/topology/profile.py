"""From the kernel's :class:`~dlsched.core.job.Job` to the paper's job profile, and the record of a
running job that the utility and the speed model need (its profile and the buses it loads).

The paper profiles AlexNet, CaffeNet and GoogLeNet only: any other model is treated as GoogLeNet,
the least communication-bound of the three, so an unknown model is never pushed around for a
traffic it may not have. A job without a batch size is taken as batch 32 (a medium batch). A job
without a minimum utility gets Table 1's: 0.5 for multi-GPU jobs, 0.3 for single-GPU jobs. Only
request fields are read (model, batch, GPUs, minimum utility, predicted duration), so policies
may call this.
"""

from __future__ import annotations

import math
from typing import NamedTuple

from dlsched.core.job import Job
from dlsched.topology.jobgraph import MODELS, JobProfile

DEFAULT_BATCH = 32
FALLBACK_MODEL = "googlenet"
MIN_UTILITY_MULTI_GPU = 0.5    # Table 1
MIN_UTILITY_SINGLE_GPU = 0.3   # Table 1


def paper_model(name: str) -> str:
    """The profiled model a job's model name maps to."""
    low = name.lower()
    return low if low in MODELS else FALLBACK_MODEL


def min_utility_of(job: Job) -> float:
    """The job's own minimum utility, else Table 1's default for its GPU count."""
    if not math.isnan(job.min_utility):
        return job.min_utility
    return MIN_UTILITY_SINGLE_GPU if job.gpus == 1 else MIN_UTILITY_MULTI_GPU


def job_profile(job: Job, node_gpus: int = 0) -> JobProfile:
    """The paper's profile of ``job``. ``node_gpus``: the largest node of its VC; a job wider than
    that is the only kind allowed to span nodes (0: unknown, never split)."""
    solo = 1.0 if math.isnan(job.pred_duration) else job.pred_duration
    return JobProfile(job.job_id, paper_model(job.model_name), job.batch_size or DEFAULT_BATCH, job.gpus,
                      max(solo, 1.0), min_utility_of(job), job.submit_time,
                      single_node=node_gpus <= 0 or job.gpus <= node_gpus)


class CoRunner(NamedTuple):
    """A running job as the utility (Eq. 4) and the interference model see it."""

    job_id: str
    profile: JobProfile
    placement: tuple[tuple[int, int], ...]
    footprint: frozenset
