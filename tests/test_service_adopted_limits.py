"""Issue 35 pt 5: after a restart, an adopted pod's time limit counts from its original start
(the kubelet's ``status.startTime``, else its bind: the ``PodScheduled`` condition's time), not
from the restart; a pod with neither is counted and its limit runs from the adoption."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts, pod_facts
from dlsched.service.record import stimulus_fields, stimulus_from_fields
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def restarted_core(t: float = 1000.0):
    """A fresh core (the service just restarted) at ``t`` with one 4-GPU node."""
    clock = Clock(t)
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock)
    core.evictor = lambda intent: None
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    return core, clock


def bound(uid: str, limit: str = "100", started: float = 0.0, scheduled: float = 0.0) -> PodFacts:
    return PodFacts(uid, "default", uid, 4, "n", "Running", False, 1.0,
                    annotations={"dlsched.io/time-limit-seconds": limit, "dlsched.io/grace-seconds": "5"},
                    started=started, scheduled=scheduled)


def test_pod_facts_read_the_bind_time_from_the_pod_scheduled_condition():
    body = {"metadata": {"uid": "u", "name": "p"}, "spec": {"nodeName": "n", "containers": []},
            "status": {"phase": "Running", "conditions": [
                {"type": "Initialized", "status": "True", "lastTransitionTime": "2026-11-22T14:00:00Z"},
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2026-11-22T14:50:43Z"}]}}
    assert pod_facts(body).scheduled == 1795359043.0
    body["status"]["conditions"][1]["status"] = "False"   # not bound: no bind time
    assert pod_facts(body).scheduled == 0.0
    body["status"]["conditions"][1].update(status="True", lastTransitionTime="yesterday")
    assert pod_facts(body).scheduled == 0.0   # unparsable: unknown, the adoption counts from now


def test_an_adopted_pod_bound_before_the_restart_is_stopped_at_its_original_limit():
    core, clock = restarted_core(1000.0)
    core.pod_seen(bound("j", limit="100", scheduled=940.0))   # bound 60 s before the restart
    job = core.jobs["j"]
    assert job.state.name == "RUNNING" and job.attained == 4 * 60.0
    core.run_pass()
    assert core.passes_part.timers == [(1040.0, ("limit", "j"))]   # 100 s from 940, not from 1000
    clock.t = 1039.0
    assert core.fire_timers() == 0
    clock.t = 1040.0
    assert core.fire_timers() == 1
    assert [r["reason"] for r in core.store.eviction_rows()] == ["time limit"]


def test_the_kubelet_start_wins_over_the_bind_and_a_limit_already_run_out_stops_at_once():
    core, clock = restarted_core(1000.0)
    core.pod_seen(bound("k", limit="30", started=950.0, scheduled=900.0))   # ran 50 s of 30
    core.run_pass()
    assert core.passes_part.timers == [(1000.0, ("limit", "k"))]
    assert core.fire_timers() == 1
    assert [r["pod"] for r in core.store.eviction_rows()] == ["default/k"]


def test_a_pod_with_no_start_or_bind_time_counts_from_the_adoption_and_says_so():
    core, _ = restarted_core(1000.0)
    core.pod_seen(bound("u", limit="100"))
    core.run_pass()
    assert core.passes_part.timers == [(1100.0, ("limit", "u"))]
    assert core.jobs["u"].attained == 0.0
    assert core.counters["adopted pods with a limit but no start or bind time (counted from adoption)"] == 1


def test_a_bind_time_ahead_of_the_clock_counts_as_no_run_time_yet():
    core, _ = restarted_core(1000.0)
    core.pod_seen(bound("s", limit="100", scheduled=1010.0))   # clock skew
    core.run_pass()
    assert core.passes_part.timers == [(1100.0, ("limit", "s"))]


def test_the_run_time_before_adoption_is_in_the_recorded_stimulus():
    from dlsched.kernel.stimuli import JobAdopted

    core, _ = restarted_core(1000.0)
    core.pod_seen(bound("j", scheduled=940.0))
    job = core.jobs["j"]
    fields = stimulus_fields(JobAdopted(job, ((0, 0b1111),), False, 60.0), core.state)
    assert fields["ran_s"] == 60.0
    again = stimulus_from_fields(fields, {"j": job}, core.state, None)   # a replay books the same run time
    assert again == JobAdopted(job, ((0, 0b1111),), False, 60.0)
    assert "ran_s" not in stimulus_fields(JobAdopted(job, ((0, 0b1111),)), core.state)
