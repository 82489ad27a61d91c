"""Stop reasons are one enum whose values are the words observers and files always saw."""

from __future__ import annotations

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.stop import StopReason
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead


class Stops:
    """A kernel observer that keeps every (job, why) it is told."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, object]] = []

    def stopped(self, job: Job, vc, now: float, why: StopReason) -> None:
        self.seen.append((job.job_id, why))


def test_the_values_are_the_old_words():
    assert [r.value for r in StopReason] == ["finish", "preempt", "fail", "forget", "time_limit"]
    assert StopReason.FINISHED == "finish" and f"{StopReason.PREEMPTED}" == "preempt"


def test_observers_are_told_members_for_a_preemption_and_finishes():
    stops = Stops()
    jobs = [Job("long", "v", 8, 0, 100), Job("short", "v", 8, 10, 20)]
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": 1}), make_policy("srtf"),
                    SimConfig(preemption_overhead=no_overhead, check_invariants=True), observers=[stops])
    sim.run(jobs)
    assert stops.seen == [("long", StopReason.PREEMPTED), ("short", StopReason.FINISHED),
                          ("long", StopReason.FINISHED)]
    assert all(type(why) is StopReason for _, why in stops.seen)
