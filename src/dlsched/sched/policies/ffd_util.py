"""First-fit decreasing by predicted utilisation (the GPU-utilisation-prediction paper's §6
prototype): the queue is ordered by *predicted* utilisation, highest first, and every job is
tried in that order (the bin-packing sweep; backfill on by default); the ``ffd-util``
placement keeps each GPU's predicted utilisation within 100 % and at most 3 jobs. A job that
crashes out of memory is resubmitted with its request corrected (the inherited ``job_failed``)."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy
from dlsched.sched.sharing.load import pred_util


class FfdUtilPolicy(OrderingPolicy):
    """First-fit decreasing by predicted GPU utilisation, <= 3 jobs per GPU, resubmit on OOM."""

    name = "ffd-util"
    default_placement = "ffd-util"

    def __init__(self, placer, backfill: bool = True) -> None:
        super().__init__(placer, backfill)

    def key(self, job: Job) -> float:
        return -pred_util(job)
