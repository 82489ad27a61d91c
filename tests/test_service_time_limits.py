"""Time limits live, on the core with a fake clock: a pod's limit is its
``dlsched.io/time-limit-seconds`` annotation (dlsched's run time, across evictions, enforced by an
eviction: intent in the store first, grace period, decision log) or its
``spec.activeDeadlineSeconds`` (the kubelet's: a pod it started is left to it, and its
``DeadlineExceeded`` failure is a stop at the limit; on a node without a kubelet dlsched evicts
it). Either way the job ends with ``StopReason.TIME_LIMIT``; a pod without a limit gets none."""

from __future__ import annotations

import pytest

from dlsched.kernel.stimuli import Evict, Timer
from dlsched.kernel.stop import StopReason
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.evictions import Intent
from dlsched.service.pods import NodeFacts, PodError, PodFacts, pod_facts
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_core(policy: str = "fifo"):
    clock = Clock()
    core = SchedulerCore(make_policy(policy), Store("sqlite://"), clock=clock)
    sent: list[Intent] = []
    core.evictor = sent.append
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    return core, sent, clock


def pod(uid: str, limit: str | None = None, deadline: int | None = None, node: str = "", phase: str = "Pending",
        started: float = 0.0, reason: str = "", deleting: bool = False, gpus: int = 4) -> PodFacts:
    ann = {"dlsched.io/grace-seconds": "5"}
    if limit is not None:
        ann["dlsched.io/time-limit-seconds"] = limit
    return PodFacts(uid, "default", uid, gpus, node, phase, deleting, 1.0, annotations=ann, deadline_s=deadline,
                    reason=reason, started=started)


def start(core, clock, uid: str, **kw) -> None:
    """``uid`` nominated at the clock's time and bound (Running; ``started`` only with a kubelet)."""
    core.pod_seen(pod(uid, **kw))
    core.run_pass()
    assert core.jobs[uid].state.name == "ASSUMED"
    core.pod_seen(pod(uid, node="n", phase="Running", **kw))
    assert core.jobs[uid].state.name == "RUNNING"


def test_pod_facts_read_the_deadline_the_reason_and_the_start_and_refuse_a_bad_deadline():
    body = {"metadata": {"uid": "u", "name": "p"}, "spec": {"activeDeadlineSeconds": 600, "containers": []},
            "status": {"phase": "Failed", "reason": "DeadlineExceeded", "startTime": "2026-11-22T14:50:43Z"}}
    facts = pod_facts(body)
    assert (facts.deadline_s, facts.reason, facts.started) == (600, "DeadlineExceeded", 1795359043.0)
    for bad in (0, -5, "600", True, 1.5):
        body["spec"]["activeDeadlineSeconds"] = bad
        with pytest.raises(PodError, match="Pod.spec.activeDeadlineSeconds"):
            pod_facts(body)


def test_a_pod_without_a_limit_gets_none_and_a_bad_annotation_is_counted_not_used():
    core, _, _ = make_core()
    core.pod_seen(pod("a"))
    core.pod_seen(pod("b", limit="soon", gpus=1))
    core.pod_seen(pod("c", limit="-3", deadline=90, gpus=1))
    assert core.jobs["a"].time_limit_s is None and core.jobs["b"].time_limit_s is None
    assert core.jobs["c"].time_limit_s == 90.0   # the deadline still applies
    assert core.counters["bad time-limit annotations (ignored)"] == 2
    core.run_pass()
    assert core.passes_part.timers == []   # no limit: no limit timer


def test_the_annotation_limit_is_stopped_by_an_eviction_at_the_limit_and_ends_the_job():
    core, sent, clock = make_core()
    start(core, clock, "j", limit="100")
    assert core.passes_part.timers == [(1100.0, ("limit", "j"))]
    clock.t = 1099.0
    assert core.fire_timers() == 0
    clock.t = 1100.0
    assert core.fire_timers() == 1
    rows = core.store.eviction_rows()
    assert [(r["pod"], r["reason"], r["grace_s"], r["state"]) for r in rows] == [("default/j", "time limit", 5,
                                                                                  "pending")]
    assert sent == [Intent(rows[0]["id"], "j", "default", "j", "", "time limit", 5)]
    assert core.jobs["j"].state.name == "RUNNING"   # it keeps its GPUs while it checkpoints
    core.eviction_sent(sent[0], "accepted")
    core.pod_seen(pod("j", limit="100", node="n", phase="Running", deleting=True))
    clock.t = 1105.0
    job = core.jobs["j"]
    core.pod_gone("j")
    assert "j" not in core.jobs and job.end_time == 1105.0
    kinds = [d["kind"] for d in core.store.decision_log(limit=100)]
    assert kinds.count("evict") == 1 and kinds.count("time_limit") == 1 and "preempted" not in kinds
    story = [d for d in core.store.decision_log(limit=100) if d["kind"] == "time_limit"][0]
    assert "stopped by dlsched at its time limit (100 s of run time" in story["detail"]
    assert core.store.decision_counts()["time_limit"] == 1
    assert core.counters["jobs stopped at their time limit"] == 1
    assert core.state.node_free[0] == 4
    core.state.check_invariants()


def test_the_kernel_terminates_with_time_limit_live_and_the_observers_hear_it():
    core, sent, clock = make_core()
    heard: list = []

    class Ear:
        def stopped(self, job, vc, now, why):
            heard.append((job.job_id, why, now))

    core.state.add_observer(Ear())
    start(core, clock, "j", limit="50")
    clock.t = 1060.0
    core.fire_timers()   # late: still one eviction
    core.eviction_sent(sent[0], "accepted")
    clock.t = 1061.0
    core.pod_seen(pod("j", limit="50", node="n", phase="Failed"))   # failed after its eviction
    assert heard == [("j", StopReason.TIME_LIMIT, 1061.0)]


def test_a_deadline_a_kubelet_counts_is_left_to_it_and_its_deadline_exceeded_is_a_time_limit_stop():
    core, sent, clock = make_core()
    start(core, clock, "k", deadline=300, started=1001.0)
    clock.t = 1300.0
    assert core.fire_timers() == 1
    assert sent == [] and core.store.eviction_rows() == []
    assert core.counters["time limits left to the kubelet (activeDeadlineSeconds)"] == 1
    clock.t = 1301.0
    core.pod_seen(pod("k", deadline=300, node="n", phase="Failed", reason="DeadlineExceeded", started=1001.0))
    assert "k" not in core.jobs and core.state.node_free[0] == 4
    story = [d for d in core.store.decision_log(limit=100) if d["kind"] == "time_limit"]
    assert len(story) == 1 and "activeDeadlineSeconds (300 s): DeadlineExceeded" in story[0]["detail"]


def test_a_deadline_on_a_node_without_a_kubelet_is_evicted_by_dlsched():
    core, sent, clock = make_core()
    start(core, clock, "x", deadline=60)   # bound, never started by a kubelet (no status.startTime)
    clock.t = 1060.0
    core.fire_timers()
    assert [i.reason for i in sent] == ["time limit"]
    core.eviction_sent(sent[0], "accepted")
    core.pod_gone("x")
    assert core.store.decision_counts()["time_limit"] == 1


def test_an_ordinary_failure_is_not_a_time_limit_stop():
    core, _, clock = make_core()
    start(core, clock, "f", deadline=600, started=1001.0)
    clock.t = 1010.0
    core.pod_seen(pod("f", deadline=600, node="n", phase="Failed", reason="Error", started=1001.0))
    assert "time_limit" not in core.store.decision_counts()


def test_a_restart_completes_a_time_limit_intent_as_a_stop_not_a_requeue():
    store = Store("sqlite://")
    clock = Clock()
    core = SchedulerCore(make_policy("fifo"), store, clock=clock)
    core.evictor = lambda intent: None
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    start(core, clock, "r", limit="10")
    clock.t = 1010.0
    core.fire_timers()
    assert store.eviction_rows()[0]["reason"] == "time limit"
    # a new process on the same store: the intent is loaded before the pods are listed
    again = SchedulerCore(make_policy("fifo"), store, clock=clock)
    resumed: list[Intent] = []
    again.evictor = resumed.append
    again.node_seen(NodeFacts("n", 4, "default", "", False))
    again.load_evictions(store.eviction_rows())
    again.pod_seen(pod("r", limit="10", node="n", phase="Running"))
    assert again.resume_evictions() == (1, 0) and [i.reason for i in resumed] == ["time limit"]
    clock.t = 1012.0
    again.pod_gone("r")
    assert "time_limit" in again.store.decision_counts() and "r" not in again.jobs


def test_the_live_kernel_returns_an_evict_at_the_limit_and_never_terminates_itself():
    core, _, clock = make_core()
    start(core, clock, "j", limit="20")
    job = core.jobs["j"]
    core.kernel.on_timer(("limit", "j"), 1019.0)   # early (a timer of an earlier run): nothing
    assert core.kernel.log.actions == []
    core.kernel.on_timer(("limit", "j"), 1020.0)
    assert job.state.name == "RUNNING" and core.kernel.log.actions == [Evict(job, "time limit")]
    core.kernel.log.actions.clear()


def test_each_start_of_a_limited_job_arms_its_timer_as_a_timer_action():
    core, _, clock = make_core()
    core.pod_seen(pod("t", limit="30"))
    from dlsched.kernel.stimuli import PassRequested

    actions = core.kernel.handle(PassRequested(), 1000.0)
    assert Timer(1030.0, ("limit", "t")) in actions


def test_the_event_log_records_limits_limit_timers_and_stops_for_replay():
    from dlsched.core.cluster import GpuType
    from dlsched.core.job import Job
    from dlsched.kernel.stimuli import JobSubmitted, JobTimedOut, TimerFired
    from dlsched.service.record import stimulus_fields, stimulus_from_fields

    core, _, _ = make_core()
    job = Job("u", "default", 2, 5.0, float("nan"))
    job.time_limit_s = 120.0
    jobs: dict = {}
    back = stimulus_from_fields(stimulus_fields(JobSubmitted(job), core.state), jobs, core.state,
                                lambda name, mem: GpuType())
    assert back.job.time_limit_s == 120.0
    fired = stimulus_fields(TimerFired(("limit", "u")), core.state)
    assert fired == {"stimulus": "TimerFired", "limit": "u"}
    assert stimulus_from_fields(fired, jobs, core.state, None) == TimerFired(("limit", "u"))
    assert stimulus_from_fields(stimulus_fields(JobTimedOut(job), core.state), jobs, core.state, None) == \
        JobTimedOut(jobs["u"])


def test_the_event_of_an_eviction_at_the_limit_says_time_limit_not_preempted():
    pytest.importorskip("kubernetes")
    from dlsched.service.kube import KubeBridge

    bodies: list[dict] = []

    class Resp:
        data = b"{}"

        def release_conn(self) -> None:
            return None

    class Api:
        def create_namespaced_event(self, namespace, body, _preload_content=True):
            bodies.append(body)
            return Resp()

    bridge = KubeBridge(Api(), core=None)
    assert bridge.preempted_event(Intent(1, "j", "default", "j", "", "time limit", 5)) == ""
    assert bridge.preempted_event(Intent(2, "l", "default", "l", "default/s", "preempted by the policy", 7)) == ""
    assert [(b["reason"], b["message"]) for b in bodies] == [
        ("TimeLimitExceeded", "stopped by dlsched at its time limit (grace 5 s)"),
        ("Preempted", "evicted by dlsched for default/s: preempted by the policy (grace 7 s)")]


def test_a_pod_that_succeeds_before_its_limit_eviction_takes_effect_finished():
    core, sent, clock = make_core()
    start(core, clock, "s", limit="30")
    clock.t = 1030.0
    core.fire_timers()
    assert len(sent) == 1
    clock.t = 1031.0
    core.pod_seen(pod("s", limit="30", node="n", phase="Succeeded"))
    kinds = core.store.decision_counts()
    assert kinds.get("finish") == 1 and "time_limit" not in kinds
    assert core.adapter.limits.stopping == set()
