"""A job's max runtime in the simulator: a Timer(("limit", id)) armed at each start, the kill at
the limit (StopReason.TIME_LIMIT), counted in summary.json and jobs.csv. Times are hand-computed;
the limit counts run time (an evicted job's wait does not count)."""

from __future__ import annotations

import csv
import json

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.limits import run_time
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import Bind, JobSubmitted, PassRequested, TimerFired
from dlsched.kernel.stop import StopReason
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead
from dlsched.sim.results import write_run


def run(jobs, policy="fifo", nodes=1, observers=()):
    sim = Simulator(ClusterSpec.from_vc_sizes({"v": nodes}), make_policy(policy),
                    SimConfig(preemption_overhead=no_overhead, check_invariants=True), observers=observers)
    return sim.run(jobs)


def ends(result):
    return {j.job_id: (j.start_time, j.end_time) for j in result.jobs}


class Stops:
    def __init__(self) -> None:
        self.seen: list[tuple[str, float, StopReason]] = []

    def stopped(self, job, vc, now, why) -> None:
        self.seen.append((job.job_id, now, why))


def test_a_job_is_killed_at_its_limit_and_the_next_one_starts_then(tmp_path):
    stops = Stops()
    jobs = [Job("capped", "v", 8, 0, 100, time_limit_s=40), Job("next", "v", 8, 5, 10)]
    res = run(jobs, observers=[stops])
    assert ends(res) == {"capped": (0, 40), "next": (40, 50)}
    assert stops.seen == [("capped", 40, StopReason.TIME_LIMIT), ("next", 50, StopReason.FINISHED)]
    assert res.extra["time_limit_kills"] == 1 and res.stops == {"capped": StopReason.TIME_LIMIT}
    summary = write_run(res, tmp_path)
    assert summary["time_limit_kills"] == 1
    assert json.loads((tmp_path / "summary.json").read_text())["time_limit_kills"] == 1
    rows = {r["job_id"]: r for r in csv.DictReader((tmp_path / "jobs.csv").open())}
    assert (rows["capped"]["stop"], rows["capped"]["time_limit_s"], rows["capped"]["end_time"]) == \
        ("time_limit", "40.0", "40.0")
    assert (rows["next"]["stop"], rows["next"]["time_limit_s"]) == ("finish", "")


def test_a_job_under_its_limit_or_ending_at_it_completes():
    jobs = [Job("under", "v", 4, 0, 30, time_limit_s=60), Job("exact", "v", 4, 0, 50, time_limit_s=50)]
    res = run(jobs)
    assert ends(res) == {"under": (0, 30), "exact": (0, 50)}
    assert res.extra["time_limit_kills"] == 0 and res.stops == {}   # a finish at the limit has completed


def test_without_limits_nothing_changes_in_the_files(tmp_path):
    res = run([Job("a", "v", 8, 0, 100), Job("b", "v", 8, 5, 10)])
    assert ends(res) == {"a": (0, 100), "b": (100, 110)}
    assert "time_limit_kills" not in res.extra
    write_run(res, tmp_path)
    header = (tmp_path / "jobs.csv").read_text().splitlines()[0].split(",")
    assert "stop" not in header and "time_limit_s" not in header


def test_the_limit_counts_run_time_across_an_eviction():
    # srtf: "long" runs 0-10 (10 s), is evicted for "short" (10-30), restarts at 30 with 60 - 10 =
    # 50 s of its limit left: killed at 80 (without a limit it would end at 120); the timer armed
    # at its first start (for t=60) fires while it runs again and changes nothing
    stops = Stops()
    jobs = [Job("long", "v", 8, 0, 100, time_limit_s=60), Job("short", "v", 8, 10, 20)]
    res = run(jobs, "srtf", observers=[stops])
    assert ends(res) == {"long": (0, 80), "short": (10, 30)}
    assert [j.preemptions for j in res.jobs] == [1, 0]
    assert stops.seen == [("long", 10, StopReason.PREEMPTED), ("short", 30, StopReason.FINISHED),
                          ("long", 80, StopReason.TIME_LIMIT)]
    assert res.extra["time_limit_kills"] == 1


def test_the_kernel_kills_through_its_timer_handler_and_ignores_an_early_timer():
    policy = make_policy("fifo")
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}), new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=False)
    job = Job("j", "v", 8, 0, 100, time_limit_s=30)
    kernel.handle(JobSubmitted(job), 0.0)
    assert [type(a) for a in kernel.handle(PassRequested(), 0.0)] == [Bind]
    assert run_time(job, 20.0) == 20.0
    kernel.handle(TimerFired(("limit", "j")), 20.0)   # not yet: it has run 20 of its 30 s
    assert job.state is JobState.RUNNING
    kernel.handle(TimerFired(("limit", "j")), 30.0)
    assert job.state is JobState.FINISHED and job.end_time == 30.0
    assert state.terminated == {job: StopReason.TIME_LIMIT}


def test_an_unknown_timer_is_refused():
    policy = make_policy("fifo")
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1}), new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=False)
    with pytest.raises(StateError, match="unknown timer"):
        kernel.handle(TimerFired(("nobody", 1)), 0.0)
