"""Queues from Kubernetes (service/queues.py): the ConfigMap's ``queues.toml`` read at start and
on change, invalid content keeping the last good configuration (counted, one Warning event per
version), namespaces mapped to VCs, and ``GET /api/v1/queues``."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts, VcMapping
from dlsched.service.queues import LiveQueues, parse_ref
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

GOOD = """
[[queues]]
name = "research"
borrow_limit = 8
parent = "lab"
namespaces = ["team-a", "team-b"]

[[queues]]
name = "prod"
lend_limit = 4

[[queues]]
name = "lab"               # the inner queue of research alone: a tree apart from prod's
"""


class Map:
    """A ConfigMap that the test edits; ``read`` is what the API server would return."""

    def __init__(self) -> None:
        self.obj: dict | None = None
        self.rv = 0
        self.reads = 0

    def put(self, text: str | None, key: str = "queues.toml") -> None:
        self.rv += 1
        self.obj = {"metadata": {"resourceVersion": str(self.rv)}, "data": {} if text is None else {key: text}}

    def read(self) -> dict | None:
        self.reads += 1
        return self.obj


def setup():
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), VcMapping({"ops": "prod"}))
    core.node_seen(NodeFacts("r1", 8, "research", "", False))
    core.node_seen(NodeFacts("p1", 4, "prod", "", False))
    cm, warnings = Map(), []
    return core, cm, warnings, LiveQueues(core, "dlsched", "dlsched-queues", cm.read,
                                          lambda message, reason: warnings.append(message))


def test_good_config_applies_namespaces_and_reports_guarantee_and_use():
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    assert [s.name for s in q.specs] == ["research", "prod", "lab"] and q.version == "1" and q.error == ""
    assert core.vcs.namespaces == {"ops": "prod", "team-a": "research", "team-b": "research"}
    # a new pod of team-a joins research; its label would win
    core.pod_seen(PodFacts("u1", "team-a", "job1", 4, created=0.0))
    core.pod_seen(PodFacts("u2", "team-b", "job2", 8, created=0.0))
    core.run_pass()
    assert core.jobs["u1"].vc == "research" and core.jobs["u2"].vc == "research"
    rep = q.report()
    rows = {r["name"]: r for r in rep["queues"]}
    assert rows["research"] == {"name": "research", "configured": True, "guarantee_gpus": 8,
                                "guarantee_by_type": {"V100": 8}, "used_gpus": 4, "running": 0, "assumed": 1,
                                "pending": 1, "borrow_limit": 8, "lend_limit": None, "parent": "lab",
                                "namespaces": ["team-a", "team-b"]}
    assert rows["prod"]["lend_limit"] == 4 and rows["prod"]["borrow_limit"] is None and rows["prod"]["used_gpus"] == 0
    assert rep["source"] == {"configmap": "dlsched/dlsched-queues", "key": "queues.toml", "resource_version": "1",
                             "loaded_at": rep["source"]["loaded_at"]}
    assert rep["error"] is None and rep["counts"] == {"loaded": 1}
    # research (under lab) and prod (the root cohort) are in different trees: nothing to borrow
    assert rep["borrowing"] == {"enforced": False, "refused": None, "loans": [], "reclaims_in_flight": []}
    q.poll()
    assert q.counts["loaded"] == 1            # same resourceVersion: not parsed again


@pytest.mark.parametrize(("text", "needle"), [
    ("[[queues]\nname = 1", "not valid TOML"),
    ('[[queues]]\nname = "x"\nborrow_limit = -3', "queues[1].borrow_limit"),
    ('[[queues]]\nname = "x"\nborrow_limit = inf', "line 3: queues[1].borrow_limit = inf: want a whole number"),
    ('[[queues]]\nname = "x"\nweight = nan', "line 3: queues[1].weight = nan: want a number from"),
    ('[[queues]]\nname = "x"\nparent = "lbx"', "queues[1].parent = 'lbx': no queue has this name"),
    ("".join(f'[[queues]]\nname = "q{i}"\n' + (f'parent = "q{i - 1}"\n' if i else "") for i in range(3000)),
     "queue q101 is 101 levels below its top-level queue q0: at most 100 (the limit)"),
    ('[[queues]]\nname = "x"\ncolour = "red"', "colour"),
    ('[[queues]]\nname = "x"\nnamespaces = ["Bad_NS"]', "queues[1].namespaces"),
    ('[[queues]]\nname = "x"\nnamespaces = ["a"]\n[[queues]]\nname = "y"\nnamespaces = ["a"]',
     "namespace a is in queues x and y"),
    ('nodes = 3', "unknown top-level key(s) nodes"),
])
def test_invalid_content_keeps_the_last_good_config(text, needle):
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    cm.put(text)
    q.poll()
    assert [s.name for s in q.specs] == ["research", "prod", "lab"] and q.version == "1"
    assert needle in q.error and q.error.startswith("ConfigMap dlsched/dlsched-queues key queues.toml")
    assert q.counts == {"loaded": 1, "invalid": 1, "events": 1}
    assert len(warnings) == 1 and warnings[0].startswith("dlsched kept its last good queue configuration: ")
    q.poll()                                  # the same bad version: neither parsed nor reported again
    assert q.counts["invalid"] == 1 and len(warnings) == 1
    assert core.vcs.namespaces["team-a"] == "research"
    cm.put(GOOD.replace("borrow_limit = 8", "borrow_limit = 2"))
    q.poll()                                  # fixed: applied, the error cleared
    assert q.error == "" and q.specs[0].borrow_limit == 2 and q.report()["error"] is None


def test_deleted_configmap_or_key_clears_the_config_and_a_read_failure_is_survived():
    core, cm, warnings, q = setup()
    cm.put(GOOD)
    q.poll()
    cm.put(None)                              # the key removed
    q.poll()
    assert q.specs == () and core.vcs.namespaces == {"ops": "prod"} and q.counts["removed"] == 1
    cm.put(GOOD)
    q.poll()
    cm.obj = None                             # the ConfigMap deleted
    q.poll()
    assert q.specs == () and q.counts["removed"] == 2

    import threading

    def broken():
        raise ConnectionError("API server away")
    q.read = broken
    done = threading.Event()
    done.set()
    q.run(done)                               # one poll, failed, counted, no exception
    assert q.counts["read_failed"] == 1


def test_queues_endpoint_and_the_configmap_reference():
    pytest.importorskip("fastapi")
    from support.live_app import FakeBridge, LiveApp

    from dlsched.service.app import build_app

    core, cm, warnings, q = setup()
    service = LiveService(core, FakeBridge())
    with LiveApp(build_app(service)) as app:
        rep = app.call("GET", "/api/v1/queues")   # no ConfigMap read: the live VCs, nothing configured
        assert [(r["name"], r["configured"], r["guarantee_gpus"]) for r in rep["queues"]] == \
            [("research", False, 8), ("prod", False, 4)]
        service.queues = q
        cm.put(GOOD)
        q.poll()
        rep = app.call("GET", "/api/v1/queues")
        assert [r["configured"] for r in rep["queues"]] == [True, True]
    assert parse_ref("dlsched/dlsched-queues") == ("dlsched", "dlsched-queues")
    with pytest.raises(ValueError, match="--queues-configmap 'nope': want NAMESPACE/NAME"):
        parse_ref("nope")


# -- borrowing and reclaim enforced live (SchedulerCore.set_queues, the kernel's queue manager) ----
BORROW = """
[[queues]]
name = "A"
borrow_limit = 8
namespaces = ["team-a"]

[[queues]]
name = "B"
lend_limit = 8
namespaces = ["team-b"]
"""


class Clock:
    def __init__(self, t: float = 100.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def borrow_setup(policy=None, max_jobs_per_gpu: int = 1, recorder=None):
    clock = Clock()
    core = SchedulerCore(policy or make_policy("fifo", "consolidate"), Store("sqlite://"),
                         max_jobs_per_gpu=max_jobs_per_gpu, clock=clock, recorder=recorder)
    sent = []
    core.evictor = sent.append
    core.node_seen(NodeFacts("a-node", 8, "A", "", False))
    core.node_seen(NodeFacts("b-node", 8, "B", "", False))
    cm, warnings = Map(), []
    q = LiveQueues(core, "dlsched", "dlsched-queues", cm.read, lambda message, reason: warnings.append((reason, message)))
    return core, cm, q, sent, warnings, clock


def pod(uid: str, ns: str, node: str = "", phase: str = "Pending", grace: str | None = None) -> PodFacts:
    ann = {"dlsched.io/grace-seconds": grace} if grace else {}
    return PodFacts(uid, ns, uid, 8, node, phase, created=1.0, annotations=ann)


def test_live_borrow_reclaim_through_the_eviction_path_and_a_rebuild_from_what_runs():
    core, cm, q, sent, warnings, clock = borrow_setup()
    cm.put(BORROW)
    q.poll()
    assert core.quotas is not None and warnings == []
    core.pod_seen(pod("a0", "team-a"))
    core.pod_seen(pod("a0", "team-a", "a-node", "Running"))
    # a1 (queue A) does not fit at home: nominated on B's idle node, and the filter passes it there
    passed, _ = core.verdict(pod("a1", "team-a", grace="5"), ["a-node", "b-node"])
    assert passed == ["b-node"]
    job = core.jobs["a1"]
    assert job.vc == "A" and core.state.hosts[job].name == "B"
    core.begin_bind("a1", "b-node")
    core.end_bind("a1", "b-node", "")
    assert job.state.name == "RUNNING"
    rep = q.report()
    rows = {r["name"]: r for r in rep["queues"]}
    assert (rows["A"]["borrowed_gpus"], rows["A"]["used_gpus"], rows["B"]["lent_gpus"], rows["B"]["used_gpus"]) == \
        (8, 16, 8, 0)
    assert rep["borrowing"]["enforced"] and rep["borrowing"]["loans"] == [
        {"pod": "team-a/a1", "queue": "A", "lender": "B", "node": "b-node", "gpus": 8, "state": "running",
         "evicting": False, "outside_tree": False}]
    # a new configuration: the manager is rebuilt, its loan found from what runs where
    old = core.quotas
    cm.put(BORROW.replace("lend_limit = 8", "lend_limit = 16"))
    q.poll()
    assert core.quotas is not old and core.quotas.lent == [0, 8] and core.quotas.borrowed == [8, 0]
    core.quotas.check()
    # B's pod arrives: A's borrowed pod is evicted through the eviction path, with its grace
    clock.t = 110.0
    passed, why = core.verdict(pod("b0", "team-b"), ["a-node", "b-node"])
    assert passed == [] and why.startswith("queued by dlsched (fifo)")
    assert why.endswith("; 8 GPUs being reclaimed from queue A")
    [intent] = sent
    assert (intent.uid, intent.for_pod, intent.grace_s) == ("a1", "team-b/b0", 5)
    assert intent.reason.startswith("reclaim for queue B: its guaranteed GPUs are lent")
    log = core.store.decision_log()
    assert log[-1]["kind"] == "evict" and log[-1]["detail"].startswith(
        "evicted team-a/a1 for team-b/b0: reclaim for queue B") and log[-1]["detail"].endswith("(grace 5 s)")
    assert q.report()["borrowing"]["reclaims_in_flight"] == [
        {"pod": "team-a/a1", "queue": "A", "for_queue": "B", "gpus": 8}]
    for t in (111.0, 112.0):   # later passes: no second eviction
        clock.t = t
        core.kernel.mark(1)
        core.run_pass()
    assert len(sent) == 1 and len(core.store.eviction_rows()) == 1
    # the pod is gone after its grace period: B's head is nominated on its own node
    clock.t = 116.0
    core.pod_gone("a1")
    passed, _ = core.verdict(pod("b0", "team-b"), ["a-node", "b-node"])
    assert passed == ["b-node"]
    rows = {r["name"]: r for r in q.report()["queues"]}
    assert (rows["A"]["borrowed_gpus"], rows["B"]["lent_gpus"], rows["B"]["reclaims"], rows["A"]["reclaimed"]) == \
        (0, 0, 1, 1)
    core.state.check_invariants()
    core.quotas.check()


def test_a_borrowed_pod_found_bound_at_a_restart_is_booked_as_a_loan():
    core, cm, q, sent, warnings, clock = borrow_setup()
    cm.put(BORROW)
    q.poll()
    core.pod_seen(pod("a1", "team-a", "b-node", "Running"))   # bound before this process started
    job = core.jobs["a1"]
    assert job.vc == "A" and core.state.hosts[job].name == "B" and core.quotas.borrowed == [8, 0]
    core.quotas.check()
    core.pod_seen(pod("b0", "team-b"))
    core.run_pass()
    assert [i.uid for i in sent] == ["a1"]


@pytest.mark.parametrize("how,needle", [
    ("preemptive", "need a non-preemptive ordering policy; test-srtf-pred preempts on its own"),
    ("shared", "need exclusive GPUs (--max-jobs-per-gpu 1, not 2)"),
])
def test_borrowing_is_refused_with_a_warning_where_the_simulator_refuses_it(how, needle):
    if how == "preemptive":
        from support.evict_policy import PredictedSrtf

        core, cm, q, sent, warnings, clock = borrow_setup(PredictedSrtf(make_policy("fifo").placer))
    else:
        core, cm, q, sent, warnings, clock = borrow_setup(make_policy("fifo", share=True), max_jobs_per_gpu=2)
    cm.put(BORROW)
    q.poll()
    assert core.quotas is None and core.vcs.namespaces["team-a"] == "A"   # the rest applies
    rep = q.report()
    assert not rep["borrowing"]["enforced"] and needle in rep["borrowing"]["refused"]
    [(reason, message)] = warnings
    assert reason == "BorrowingOff" and needle in message
    core.pod_seen(pod("a0", "team-a"))
    core.pod_seen(pod("a1", "team-a"))
    core.run_pass()
    assert core.jobs["a1"].state.name == "PENDING"   # nothing borrowed


def test_the_queue_and_its_etas_with_a_loan_running():
    """The forward run behind the ETAs copies a borrowed job onto the lender's nodes as it runs."""
    core, cm, q, sent, warnings, clock = borrow_setup()
    cm.put(BORROW)
    q.poll()
    core.pod_seen(pod("a0", "team-a", "a-node", "Running"))
    core.pod_seen(pod("a1", "team-a", "b-node", "Running"))   # a loan
    core.pod_seen(pod("b0", "team-b"))
    for uid, pred in (("a0", 100.0), ("a1", 50.0), ("b0", 10.0)):
        core.jobs[uid].pred_duration = pred
    core.run_pass()   # a1 is being reclaimed for b0
    assert [i.uid for i in sent] == ["a1"]
    [row] = core.queue()
    # b0 starts in the forward run no later than a1's predicted end (100 + 50), when its node is free
    assert row["pod"] == "team-b/b0" and 100.0 <= row["eta"] <= 150.0


def recorded_borrow(path):
    """A service recording to ``path`` under BORROW: a0 bound on A's node, then a1 (A's too)
    nominated and bound on B's idle node, one second apart. Returns (core, evictions sent, clock,
    recorder)."""
    from dlsched.service.record import Recorder

    recorder = Recorder(path)
    core, cm, q, sent, warnings, clock = borrow_setup(recorder=recorder)
    cm.put(BORROW)
    q.poll()
    for uid, node in (("a0", "a-node"), ("a1", "b-node")):
        clock.t += 1.0
        passed, _ = core.verdict(pod(uid, "team-a"), ["a-node", "b-node"])
        assert passed == [node]
        core.begin_bind(uid, node)
        core.end_bind(uid, node, "")
    return core, sent, clock, recorder


def test_a_recorded_log_replays_the_borrowed_nominations_and_the_reclaim(tmp_path):
    """The queues line (written when the ConfigMap installs the manager) makes a replay of the
    stimuli enforce the same queues: the borrowed nomination and the lender's, after the reclaim,
    come out of Kernel.handle as the service made them."""
    from dlsched.registry import make_policy as registry_policy
    from dlsched.service.feed import replay_stimuli

    core, sent, clock, recorder = recorded_borrow(tmp_path / "events.jsonl")
    clock.t += 1.0
    core.pod_seen(pod("b0", "team-b"))
    core.run_pass()
    assert [i.uid for i in sent] == ["a1"]
    clock.t += 5.0
    core.pod_gone("a1")
    core.run_pass()
    assert core.jobs["b0"].state.name == "ASSUMED"
    recorder.close()
    agreement = replay_stimuli(tmp_path / "events.jsonl", registry_policy)
    assert agreement.first_difference is None and agreement.rate == 1.0
    assert agreement.replayed == [("a0", "a-node", [0, 1, 2, 3, 4, 5, 6, 7]), ("a1", "b-node", [0, 1, 2, 3, 4, 5, 6, 7]),
                                  ("b0", "b-node", [0, 1, 2, 3, 4, 5, 6, 7])]
    assert agreement.recorded_evictions == agreement.replayed_evictions == ["a1"]


def test_a_change_of_queues_is_a_recorded_stimulus_and_an_older_log_still_replays(tmp_path):
    """The ConfigMap's queues reach the kernel as a QueuesChanged stimulus (recorded with the specs
    as TOML, then the 'queues' line saying what was enforced); a log recorded before that, with
    only 'queues' lines, replays the same nominations (each line fed as that stimulus)."""
    import json

    from dlsched.registry import make_policy as registry_policy
    from dlsched.service.feed import replay_stimuli

    path = tmp_path / "events.jsonl"
    core, sent, clock, recorder = recorded_borrow(path)
    recorder.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    changes = [i for i, e in enumerate(lines) if e.get("stimulus") == "QueuesChanged"]
    assert len(changes) == 1 and "[[queues]]" in lines[changes[0]]["toml"]
    assert lines[changes[0] + 1]["kind"] == "queues"   # what was enforced, right after
    new = replay_stimuli(path, registry_policy)
    assert new.first_difference is None and new.replayed == new.recorded and len(new.recorded) == 2
    old = tmp_path / "old.jsonl"   # the same log as written before the stimulus existed
    old.write_text("".join(json.dumps(e) + "\n" for e in lines if e.get("stimulus") != "QueuesChanged"))
    assert replay_stimuli(old, registry_policy).replayed == new.replayed
    no_queues = tmp_path / "none.jsonl"   # without either, a1 cannot borrow: its recorded bind is refused
    no_queues.write_text("".join(json.dumps(e) + "\n" for e in lines
                                 if e.get("stimulus") != "QueuesChanged" and e["kind"] != "queues"))
    with pytest.raises(ValueError, match="BindSucceeded.*a1 confirmed while PENDING"):
        replay_stimuli(no_queues, registry_policy)


def test_a_log_of_a_borrowing_service_rebuilds_its_loans_for_a_what_if(tmp_path):
    """A what-if on a log recorded while queues borrowed: the recorded queues go on the rebuilt
    state and the pod started on the lender's node is booked as its queue's loan (before, the
    kernel refused a start outside the job's VC and the what-if failed)."""
    from dlsched.kernel.quotas import QuotaManager
    from dlsched.registry import make_policy as registry_policy
    from dlsched.service.whatif_log import state_at
    from dlsched.sim.eta import EtaEstimator
    from dlsched.sim.whatif import what_if

    core, sent, clock, recorder = recorded_borrow(tmp_path / "events.jsonl")
    clock.t += 1.0
    core.pod_seen(pod("a2", "team-a"))   # waits: A's node is full and A may borrow 8 GPUs only
    core.run_pass()
    assert core.jobs["a2"].state.name == "PENDING"
    recorder.close()

    policy = registry_policy("fifo", "consolidate")
    moment = state_at(tmp_path / "events.jsonl", policy)
    st = moment.state
    assert [s.name for s in moment.queues] == ["A", "B"] and moment.skipped == {}
    assert {j.job_id: h.name for j, h in st.hosts.items()} == {"a1": "B"}
    quotas = next(o for o in st.observers if isinstance(o, QuotaManager))
    assert quotas.out_total["A"] == 8 and quotas.in_total["B"] == 8
    st.check_invariants()
    quotas.check()
    result = what_if(EtaEstimator(policy, resubmit=True), registry_policy("fifo", "consolidate"), st, moment.now, ())
    (a2,) = result.jobs
    # one hour for every job (none finished before the cut): a2 starts when a0, started first, ends
    assert a2.job_id == "a2" and a2.current == pytest.approx(moment.t0 + 1.0 + 3600.0)


def test_a_queues_changed_stimulus_round_trips_through_the_log_encoding():
    """stimulus_fields / stimulus_from_fields, the one pair: the specs come back equal (parents,
    weights, per-type limits, namespaces), () as an empty TOML; damaged TOML is the reader's
    TraceError naming the key."""
    from dlsched.core.cluster import ClusterSpec
    from dlsched.kernel.quotas import QueueSpec
    from dlsched.kernel.state import ClusterState
    from dlsched.kernel.stimuli import QueuesChanged
    from dlsched.service.record import stimulus_fields, stimulus_from_fields
    from dlsched.traces.model import TraceError

    state = ClusterState(ClusterSpec.from_vc_sizes({"A": 1, "B": 1}))
    specs = (QueueSpec("lab", borrow_limit=8, lend_limit=None, weight=2.5),
             QueueSpec("A", borrow_limit=None, lend_limit=4, parent="lab", namespaces=("team-a",)),
             QueueSpec("B", borrow_limit=0, lend_limit=None, parent="lab", lend_types=(("V100", 8),)))
    fields = stimulus_fields(QueuesChanged(specs), state)
    assert fields["stimulus"] == "QueuesChanged" and set(fields) == {"stimulus", "toml"}
    assert stimulus_from_fields(fields, {}, state, None) == QueuesChanged(specs)
    empty = stimulus_fields(QueuesChanged(()), state)
    assert empty["toml"] == "" and stimulus_from_fields(empty, {}, state, None) == QueuesChanged(())
    with pytest.raises(TraceError, match="borrow_limit"):
        stimulus_from_fields({"stimulus": "QueuesChanged", "toml": '[[queues]]\nname = "A"\nborrow_limit = "x"\n'},
                             {}, state, None)
