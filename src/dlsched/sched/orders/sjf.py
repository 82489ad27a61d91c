"""Shortest job first with the true duration (an oracle baseline, non-preemptive)."""

from __future__ import annotations

from dlsched.core.job import Job
from dlsched.sched.ordering import OrderingPolicy


class SjfPolicy(OrderingPolicy):
    name = "sjf"
    oracle = True  # the grant: reads the true duration

    def key(self, job: Job) -> float:
        return job._duration  # the slot, not the guarded property: granted, and read once per queue entry
