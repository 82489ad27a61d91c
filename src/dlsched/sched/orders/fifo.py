"""First in, first out: order of submission."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy


class FifoPolicy(OrderingPolicy):
    name = "fifo"

    def key(self, job: Job) -> float:
        return job.submit_time
