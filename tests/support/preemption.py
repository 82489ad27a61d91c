"""The preemption done-when scenario (issue 26 point 2), shared by the simulator's test
(tests/test_preemption_scenario.py) and the live service's test: one job list, one cluster.

One VC ``v`` of one node with 4 GPUs; every job takes the whole node:

* ``long``  submitted at 0, runs 10,000 s, predicted 12,000 s;
* ``short`` submitted at 1,000, runs 600 s, predicted 500 s: its predicted remaining time is
  shorter than what ``long`` has left (12,000 - 1,000 attained = 11,000 s), so it evicts ``long``;
* ``medium`` submitted at 1,200, runs 2,000 s, predicted 11,500 s: it ranks *after* the evicted
  ``long`` only because ``long`` keeps its attained service (11,000 s left < 11,500 s).
"""

from __future__ import annotations

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job

VC, NODES, GPUS_PER_NODE = "v", 1, 4
OVERHEAD_S = 30.0  # the checkpoint/restart cost the expected times below are computed with

#: (job id, GPUs, submit s, true duration s, predicted duration s)
JOBS = (("long", 4, 0.0, 10_000.0, 12_000.0),
        ("short", 4, 1_000.0, 600.0, 500.0),
        ("medium", 4, 1_200.0, 2_000.0, 11_500.0))


def preemption_jobs() -> list[Job]:
    """Fresh jobs of the scenario, with their predicted durations set (``source=job``)."""
    jobs = []
    for jid, gpus, submit, duration, pred in JOBS:
        job = Job(jid, VC, gpus, submit, duration, user="u")
        job.pred_duration = pred
        jobs.append(job)
    return jobs


def preemption_cluster() -> ClusterSpec:
    return ClusterSpec.from_vc_sizes({VC: NODES}, gpus_per_node=GPUS_PER_NODE)


class StartLog:
    """A kernel observer listing every start and stop as ``(time, event, job id)``."""

    def __init__(self) -> None:
        self.events: list[tuple[float, str, str]] = []

    def started(self, job: Job, vc, now: float) -> None:
        self.events.append((now, "start", job.job_id))

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        self.events.append((now, why, job.job_id))

    def starts(self) -> list[tuple[float, str]]:
        return [(t, jid) for t, event, jid in self.events if event == "start"]
