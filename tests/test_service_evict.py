"""Live preemption in the core, without an API server: an Evict action becomes a durable intent
(store first) handed to the evictor once; the job keeps its GPUs while its pod checkpoints and is
stopped when the pod is gone; a controller's new pod takes the evicted job over (attained
service, eviction count, submit time); a restart completes a pending intent exactly once."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.evictions import Intent, grace_of, match_key
from dlsched.service.evictor import Evictor
from dlsched.service.pods import NodeFacts, PodFacts, pod_facts
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")

from support.evict_policy import PredictedSrtf  # noqa: E402


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def make_core(store: Store | None = None, clock: Clock | None = None):
    clock = clock or Clock()
    core = SchedulerCore(PredictedSrtf(make_policy("fifo").placer), store or Store("sqlite://"), clock=clock)
    sent: list[Intent] = []
    core.evictor = sent.append
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    return core, sent, clock


def job_pod(uid: str, name: str, model: str, node: str = "", phase: str = "Pending", deleting: bool = False,
            label: str | None = None, grace: str | None = None, created: float = 1.0) -> PodFacts:
    ann = {"dlsched.io/model": model}
    if grace is not None:
        ann["dlsched.io/grace-seconds"] = grace
    return PodFacts(uid, "default", name, 4, node, phase, deleting, created,
                    labels={"dlsched.io/job": label} if label else {}, annotations=ann)


def run_long(core, clock) -> None:
    """long-0 (4 GPUs, predicted 3,600 s) nominated, bound and running from t=1000."""
    core.pod_seen(job_pod("L1", "long-0", "long", label="train", grace="7"))
    core.run_pass()
    assert core.jobs["L1"].state.name == "ASSUMED"
    core.pod_seen(job_pod("L1", "long-0", "long", node="n", phase="Running", label="train", grace="7"))
    assert core.jobs["L1"].state.name == "RUNNING"


def test_an_evict_writes_one_intent_before_the_evictor_and_keeps_the_gpus_until_the_pod_is_gone():
    core, sent, clock = make_core()
    run_long(core, clock)
    clock.t = 1100.0
    core.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
    core.run_pass()
    rows = core.store.eviction_rows()
    assert [(r["pod"], r["for_pod"], r["grace_s"], r["state"]) for r in rows] == [
        ("default/long-0", "default/short-0", 7, "pending")]
    assert sent == [Intent(rows[0]["id"], "L1", "default", "long-0", "default/short-0", "preempted by the policy", 7)]
    log = core.store.decision_log()
    assert log[-1]["kind"] == "evict" and log[-1]["detail"].startswith(
        "evicted default/long-0 for default/short-0: preempted by the policy (grace 7 s)")
    assert rows[0]["decision_id"] == log[-1]["id"]
    # more passes while it is in flight: no second intent
    for t in (1101.0, 1102.0):
        clock.t = t
        core.kernel.mark(0)
        core.run_pass()
    assert len(core.store.eviction_rows()) == 1 and len(sent) == 1
    assert core.counters["evictions already in flight"] == 2
    # the API accepted: the pod is deleting (its grace period) and still holds the 4 GPUs
    core.eviction_sent(sent[0], "accepted")
    assert core.store.eviction_rows()[0]["state"] == "done"
    core.pod_seen(job_pod("L1", "long-0", "long", node="n", phase="Running", deleting=True, label="train"))
    assert core.jobs["L1"].state.name == "RUNNING" and core.state.node_free[0] == 0
    assert core.jobs["S1"].state.name == "PENDING"
    # gone after 7 s: attained 4 GPUs x 107 s booked, the short job nominated in the same pass
    clock.t = 1107.0
    core.pod_gone("L1")
    core.run_pass()
    assert core.jobs["S1"].state.name == "ASSUMED"
    assert "L1" not in core.jobs
    waiting = core.evictions.awaiting[("label", "default", "train")]
    assert (waiting.attained, waiting.preemptions, waiting.submit_time) == (4 * 107.0, 1, 1.0)
    core.state.check_invariants()


def test_the_controllers_new_pod_takes_the_evicted_job_over_and_runs_again():
    core, sent, clock = make_core()
    run_long(core, clock)
    clock.t = 1100.0
    core.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
    core.run_pass()
    core.eviction_sent(sent[0], "accepted")
    # the replacement appears while the old pod still checkpoints: parked, no job of its own
    core.pod_seen(job_pod("L2", "long-1", "long", label="train", created=50.0))
    assert "L2" not in core.jobs and "replaces default/long-0" in core.waiting["L2"]
    clock.t = 1110.0
    core.pod_gone("L1")
    core.run_pass()
    job = core.jobs["L2"]
    assert job.job_id == "L2" and job.preemptions == 1 and job.attained == 4 * 110.0
    assert job.submit_time == 1.0 and job.state.name == "PENDING"
    assert core.jobs["S1"].state.name == "ASSUMED"
    core.pod_seen(job_pod("S1", "short-0", "short", node="n", phase="Running", created=2.0))
    clock.t = 1170.0
    core.pod_gone("S1")   # the short job finished
    core.run_pass()
    assert core.jobs["L2"].state.name == "ASSUMED"
    assert core.counters["evicted jobs re-queued"] == 1
    kinds = [d["kind"] for d in core.store.decision_log(limit=1000)]
    assert kinds.count("evict") == 1 and kinds.count("requeue") == 1 and kinds.count("preempted") == 1
    core.state.check_invariants()


def test_a_bare_pod_evicted_ends_and_a_new_pod_of_its_name_is_a_new_job():
    core, sent, clock = make_core()
    core.pod_seen(job_pod("B1", "bare", "long"))
    core.run_pass()
    core.pod_seen(job_pod("B1", "bare", "long", node="n", phase="Running"))
    clock.t = 1050.0
    core.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
    core.run_pass()
    assert sent[0].grace_s == 30                                      # no annotation: the default
    core.pod_seen(job_pod("B1", "bare", "long", node="n", phase="Failed"))   # gone as Failed
    assert "B1" not in core.jobs and not core.evictions.awaiting
    assert core.counters["evicted pods without a controller (ended)"] == 1
    core.pod_seen(job_pod("B2", "bare", "long", created=60.0))
    assert core.jobs["B2"].attained == 0.0 and core.jobs["B2"].preemptions == 0


def test_a_nomination_preempted_before_its_bind_is_withdrawn_not_evicted():
    core, sent, clock = make_core()
    core.pod_seen(job_pod("L1", "long-0", "long"))
    core.run_pass()
    core.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
    core.kernel.mark(0)
    core.run_pass()
    assert sent == [] and core.counters["nominations withdrawn by a preemption"] == 1
    assert core.store.eviction_rows() == []


def test_a_restart_completes_a_pending_intent_once_and_never_a_done_one(tmp_path):
    url = f"sqlite:///{tmp_path}/s.db"
    core, sent, clock = make_core(Store(url))
    run_long(core, clock)
    core.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
    core.run_pass()
    assert len(sent) == 1   # ... and the process dies before the API call
    core.store.close()

    for attempt in range(2):
        store = Store(url)
        core2 = SchedulerCore(PredictedSrtf(make_policy("fifo").placer), store, clock=Clock(1200.0))
        resent: list[Intent] = []
        core2.evictor = resent.append
        core2.load_evictions(store.eviction_rows())
        core2.node_seen(NodeFacts("n", 4, "default", "", False))
        core2.pod_seen(job_pod("L1", "long-0", "long", node="n", phase="Running", label="train", grace="7",
                               deleting=attempt == 1))
        core2.pod_seen(job_pod("S1", "short-0", "short", created=2.0))
        resumed = core2.resume_evictions()
        core2.run_pass()
        if attempt == 0:
            assert resumed == (1, 0) and [i.intent_id for i in resent] == [sent[0].intent_id]
            core2.eviction_sent(resent[0], "accepted")
        else:   # done: the pod is terminating; never sent again, and no new intent
            assert resumed == (0, 0) and resent == []
            assert core2.jobs["L1"].state.name == "RUNNING"
        assert len(store.eviction_rows()) == 1
        store.close()


def test_evictor_retries_a_pdb_refusal_and_reports_once():
    calls: list[str] = []
    outcomes = iter(["retry: 429 Cannot evict pod as it would violate the pod's disruption budget", "accepted"])
    reported: list[tuple] = []
    events: list[str] = []
    t = [0.0]
    ev = Evictor(lambda i: calls.append(i.name) or next(outcomes), lambda i, o: reported.append((i.name, o)),
                 lambda i: events.append(i.name) or "", retry_s=2.0, clock=lambda: t[0])
    intent = Intent(1, "u", "default", "p", "default/q", "why", 5)
    assert ev.step(intent).startswith("retry: 429")
    assert ev.stats["pdb_refusals"] == 1 and reported == [] and ev.pending() == 1
    t[0] = 2.0
    import threading
    done = threading.Event()
    assert ev._next(done) is intent
    assert ev.step(intent) == "accepted"
    assert calls == ["p", "p"] and reported == [("p", "accepted")] and events == ["p"]


def test_match_key_and_grace_rules():
    raw = {"metadata": {"uid": "u", "name": "train-x7k2p", "namespace": "ml", "generateName": "train-",
                        "ownerReferences": [{"kind": "Job", "uid": "J1", "controller": True, "name": "train"}]},
           "spec": {"containers": []}}
    assert match_key(pod_facts(raw)) == ("owner", "ml", "J1", "train-")
    raw["metadata"]["labels"] = {"dlsched.io/job": "t"}
    assert match_key(pod_facts(raw)) == ("label", "ml", "t")
    assert match_key(PodFacts("u", "d", "n", 1)) is None
    assert grace_of(job_pod("u", "n", "m", grace="12"), 30) == (12, False)
    assert grace_of(job_pod("u", "n", "m", grace="-1"), 30) == (30, True)
    assert grace_of(job_pod("u", "n", "m"), 30) == (30, False)


def test_oracles_stay_refused_and_preemptive_non_oracles_run():
    with pytest.raises(ValueError, match="policy srtf is an oracle.*srtf-pred"):
        SchedulerCore.check_policy(make_policy("srtf"))
    SchedulerCore.check_policy(make_policy("pab"))
    SchedulerCore.check_policy(PredictedSrtf(make_policy("fifo").placer))


def test_the_deploy_example_is_a_preemptible_job_the_match_rule_ties_together():
    """deploy/preempt-job.yaml: its pods carry the dlsched.io/job label (two pods of the Job match)
    and a grace annotation kubelet's own terminationGracePeriodSeconds does not cut short."""
    from pathlib import Path

    yaml = pytest.importorskip("yaml")
    job, = [d for d in yaml.safe_load_all((Path(__file__).parents[1] / "deploy/preempt-job.yaml").read_text()) if d]
    assert job["kind"] == "Job"
    template = job["spec"]["template"]
    pods = [pod_facts({"metadata": {**template["metadata"], "uid": f"u{i}", "name": f"resnet-train-{i}",
                                    "namespace": "default"}, "spec": template["spec"]}) for i in range(2)]
    assert match_key(pods[0]) == match_key(pods[1]) == ("label", "default", "resnet-train")
    grace, bad = grace_of(pods[0], 30)
    assert not bad and grace == 90 <= template["spec"]["terminationGracePeriodSeconds"]
    assert pods[0].gpus == 4


def test_the_default_grace_period_is_the_policys_guard_and_srtf_pred_runs_live():
    from dlsched.registry import make_policy
    from dlsched.service.core import SchedulerCore
    from dlsched.service.evictions import policy_grace

    assert policy_grace(make_policy("srtf-pred", grace_s=45.0)) == 45
    assert policy_grace(make_policy("srtf-pred")) == 30      # grace_s 0 (the default): 30 s live
    assert policy_grace(make_policy("pab", grace_s=120.0)) == 120
    SchedulerCore.check_policy(make_policy("srtf-pred"))     # preemptive, not an oracle: allowed
    with pytest.raises(ValueError, match="srtf-pred is SRTF by predicted remaining time"):
        SchedulerCore.check_policy(make_policy("srtf"))


def test_pab_live_requeues_a_shared_pod_whose_reported_throughput_dropped():
    """PAB's check reads the job's observed rate: live, the agent's ``speed`` reading (the pod's
    throughput relative to running alone). B shares A's GPUs from 1061; at 1090 it reports 0.3;
    its check at 1121 (start + 60 s warm-up) asks for its eviction, with PAB's reason."""
    clock = Clock(1000.0)
    core = SchedulerCore(make_policy("pab", share=True), Store("sqlite://"), clock=clock, max_jobs_per_gpu=2)
    sent: list[Intent] = []
    core.evictor = sent.append
    core.node_seen(NodeFacts("n", 4, "default", "", False))

    def pod(uid: str, node: str = "", phase: str = "Pending") -> PodFacts:
        return PodFacts(uid, "default", uid.lower(), 4, node, phase, False, 1.0, labels={"dlsched.io/job": uid})

    for uid, t in (("A", 1000.0), ("B", 1010.0)):
        clock.t = t
        core.pod_seen(pod(uid))
        core.jobs[uid].pred_gpu_mem_mib, core.jobs[uid].pred_gpu_util = 4000.0, 40.0
        core.run_pass()
        if uid == "A":
            core.pod_seen(pod("A", "n", "Running"))
    assert core.jobs["B"].state.name == "PENDING"           # PAB profiles A alone until 1060
    clock.t = 1061.0
    assert core.fire_timers() == 1 and core.jobs["B"].state.name == "ASSUMED"   # placed on A's GPUs
    core.pod_seen(pod("B", "n", "Running"))
    clock.t = 1090.0
    assert core.observe("B", 35.0, 4000.0, 60.0, 0.3) == "warming up" and core.jobs["B"].speed == 0.3
    clock.t = 1125.0
    core.fire_timers()
    assert [(i.uid, i.reason) for i in sent] == [("B", "pab: throughput 30% of running alone, below 50%")]
    assert core.counters["evictions requested"] == 1 and core.jobs["A"].state.name == "RUNNING"


def test_an_agent_reading_carries_the_throughput_to_the_core():
    from dlsched.service.runtime import LiveService

    core, _, clock = make_core()
    run_long(core, clock)
    service = LiveService(core, None, token="t")
    assert service.observe("n", [("L1", 50.0, 1000.0, 0.6), ("nobody", None, None)]) == \
        {"node": "n", "warming up": 1, "unknown": 1}
    assert core.jobs["L1"].speed == 0.6
