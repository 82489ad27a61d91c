"""The live service as an adapter of the kernel: every pod/node change becomes a typed stimulus
through ``Kernel.handle`` (recorded in order), actions come back as nominations, waiting reasons
and timers; the service writes no ground-truth slot, asks the pipeline for its scores and refuses
a multi-node placement before nominating it; a policy's ``wake_at`` fires live."""

from __future__ import annotations

import json
import math
import threading
import time

import pytest

from dlsched.registry import make_policy
from dlsched.sched.policies.fifo import FifoPolicy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.record import Recorder
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Clock:
    """A settable service clock."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def pod(uid: str, gpus: int, node: str = "", phase: str = "Pending", **ann: str) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, node_name=node, phase=phase, created=1.0, annotations=dict(ann))


def stimuli(path) -> list[dict]:
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["kind"] == "stimulus"]


def test_every_change_reaches_the_kernel_as_a_recorded_stimulus(tmp_path):
    clock = Clock()
    rec = Recorder(tmp_path / "log.jsonl")
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock, recorder=rec)
    service = LiveService(core, Bridge())
    core.node_seen(NodeFacts("n1", 2, "default", "", False))
    core.node_seen(NodeFacts("n1", 2, "default", "", True))        # cordoned
    core.node_seen(NodeFacts("n1", 2, "default", "", False))       # uncordoned
    core.node_seen(NodeFacts("n2", 2, "default", "", False))
    assert core.filter(pod("a", 2), ["n1", "n2"])[0] == ["n1"]      # JobSubmitted, PassRequested
    clock.t = 1010.0
    assert service.bind("default", "a", "a", "n1") == ""             # BindSucceeded
    core.pod_seen(pod("b", 2))                                       # JobSubmitted
    core.run_pass()                                                  # PassRequested: b on n2
    core.end_bind("b", "n2", "the API server said no")               # BindFailed
    clock.t = 1100.0
    assert core.observe("a", 50.0, 1234.0, warmup=10.0) == "corrected"   # PredictionCorrected
    core.pod_seen(pod("a", 2, node="n1", phase="Succeeded"))         # JobFinished, JobWithdrawn
    core.pod_gone("b")                                               # JobWithdrawn (pending)
    core.node_gone("n2")                                             # NodeChanged removed
    rec.close()
    seen = [(e["stimulus"], e.get("uid") or e.get("node")) for e in stimuli(tmp_path / "log.jsonl")]
    assert seen == [
        ("NodeChanged", "n1"), ("NodeChanged", "n1"), ("NodeChanged", "n1"), ("NodeChanged", "n2"),
        ("JobSubmitted", "a"), ("PassRequested", None), ("BindSucceeded", "a"),
        ("JobSubmitted", "b"), ("PassRequested", None), ("BindFailed", "b"),
        ("PredictionCorrected", "a"), ("JobFinished", "a"), ("JobWithdrawn", "a"), ("JobWithdrawn", "b"),
        ("NodeChanged", "n2"),
    ]
    events = stimuli(tmp_path / "log.jsonl")
    assert [e.get("change") for e in events if e["stimulus"] == "NodeChanged"] == \
        ["added", "cordoned", "uncordoned", "added", "removed"]
    sub = next(e for e in events if e["stimulus"] == "JobSubmitted")
    assert (sub["vc"], sub["gpus"], sub["pred_gpu_mem_mib"]) == ("default", 2, None)
    fixed = next(e for e in events if e["stimulus"] == "PredictionCorrected")
    assert (fixed["pred_gpu_util"], fixed["pred_gpu_mem_mib"]) == (50.0, 1234.0)
    assert next(e for e in events if e["stimulus"] == "BindFailed")["why"] == "bind failed: the API server said no"
    core.state.check_invariants()


def test_a_finished_pod_teaches_the_estimators_its_run_time_without_truth_writes():
    """The kernel's run record says how long a job held its GPUs (job.attained_at); the
    estimators read the run time from it. The service never writes the job's true duration or remaining time."""
    clock = Clock()
    learnt: list[float] = []

    class Learning(FifoPolicy):
        name = "learning"

        def job_finished(self, job, now):
            from dlsched.predictors.duration.observed import observed_duration
            learnt.append(observed_duration(job))

    core = SchedulerCore(Learning(make_policy("fifo").placer), Store("sqlite://"), clock=clock)
    service = LiveService(core, Bridge())
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    assert core.filter(pod("a", 2), ["n"])[0] == ["n"]
    clock.t = 1005.0
    assert service.bind("default", "a", "a", "n") == ""
    job = core.jobs["a"]
    clock.t = 1305.0
    core.pod_seen(pod("a", 2, node="n", phase="Succeeded"))
    assert math.isnan(job._duration)            # the service wrote no true duration
    assert math.isnan(job._remaining)            # nor a remaining time: truth is a simulator's physics
    assert (job.run_since, job.end_time) == (1000.0, 1305.0)   # the run record: nominated at 1000, held since
    assert learnt == [pytest.approx(305.0)]


@pytest.mark.parametrize("policy, placement, share", [("fifo", None, False), ("fifo", "best-fit", False),
                                                      ("horus", None, True), ("fifo", "ffd-util", True)])
def test_prioritize_asks_the_pipeline_for_its_scores(policy, placement, share):
    """prioritize maps PlacementPipeline.scores (the weighted mean in [0, 1]) to 1..9, node by node."""
    from dlsched.service.core import _priority

    preds = {"a": (30.0, 4000.0)}

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = preds["a"]

    cap = 2 if share else 1
    core = SchedulerCore(make_policy(policy, placement, share=share), Store("sqlite://"), max_jobs_per_gpu=cap,
                         clock=Clock(), predict=predict)
    service = LiveService(core, Bridge())
    for name, gpus in (("n1", 4), ("n2", 2), ("n3", 8)):
        core.node_seen(NodeFacts(name, gpus, "default", "", False))
    for uid in ("p0", "p1"):
        passed = core.filter(pod(uid, 1, **{"dlsched.io/model": "a"}), ["n1", "n2", "n3"])[0]
        assert service.bind("default", uid, uid, passed[0]) == ""
    waiting = pod("w", 2, **{"dlsched.io/model": "a"})
    core.pod_seen(waiting)
    job = core.jobs["w"]
    raw = core.policy.placer.scores(core.view, job.vc_state, job)
    assert raw and all(0.0 <= v <= 1.0 + 1e-9 for v in raw.values())
    expect = {core.state.node_ids[n]: _priority(v) for n, v in raw.items()}
    got = dict(zip(["n1", "n2", "n3"], core.priorities(waiting, ["n1", "n2", "n3"])))
    nominated = core.state.node_ids[job.placement[0][0]] if job.state.name == "ASSUMED" else None
    for name in ("n1", "n2", "n3"):
        assert got[name] == (10 if name == nominated else expect.get(name, 0))


def test_a_multi_node_placement_is_refused_before_it_is_nominated(tmp_path):
    """A 4-GPU pod on two 2-GPU nodes: the placer would span them; the service's placement
    refuses it before any nomination (no store row, no forget), with the reason."""
    rec = Recorder(tmp_path / "log.jsonl")
    # first-fit spans nodes when no single node has room (consolidate would wait)
    core = SchedulerCore(make_policy("fifo", "first-fit"), Store("sqlite://"), clock=Clock(), recorder=rec)
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    core.node_seen(NodeFacts("n2", 4, "default", "", False))
    core.pod_seen(pod("x", 2, node="n1", phase="Running"))     # adopted: 2 free on n1
    core.pod_seen(pod("y", 2, node="n2", phase="Running"))     # 2 free on n2
    passed, why = core.filter(pod("big", 4), ["n1", "n2"])
    rec.close()
    assert passed == [] and core.jobs["big"].state.name == "PENDING"
    kinds = [e["kind"] for e in map(json.loads, (tmp_path / "log.jsonl").read_text().splitlines())]
    assert "forget" not in kinds and kinds.count("start") == 2      # the two adoptions only
    assert not [r for r in core.store.assignment_rows() if r["pod_uid"] == "big"]
    assert "multi-node placements refused" not in core.counters
    job = core.jobs["big"]
    fit = core.policy.placer.place(core.view, job.vc_state, job)
    assert fit.placement is None and "spans 2 nodes" in fit.reason
    core.state.check_invariants()


class Gate(FifoPolicy):
    """FIFO that starts nothing before ``open_at`` and asks for a pass then (``view.wake_at``)."""

    name = "gate"

    def __init__(self, placer, open_at: float) -> None:
        super().__init__(placer)
        self.open_at = open_at

    def schedule(self, view, vc):
        if view.now < self.open_at:
            view.wake_at(self.open_at, vc)
            return
        yield from super().schedule(view, vc)


def test_wake_at_becomes_a_timer_that_fires_a_pass_fake_clock(tmp_path):
    clock = Clock()
    rec = Recorder(tmp_path / "log.jsonl")
    core = SchedulerCore(Gate(make_policy("fifo").placer, open_at=1030.0), Store("sqlite://"), clock=clock,
                         recorder=rec)
    nudged: list[str] = []
    core.nudge = lambda p, node, gpus, waited: nudged.append(f"{p.uid}@{node}:{gpus}")
    core.node_seen(NodeFacts("n", 2, "default", "", False))
    assert core.filter(pod("a", 1), ["n"])[0] == []
    assert core.next_timer() == 1030.0
    clock.t = 1029.0
    assert core.fire_timers() == 0 and core.jobs["a"].state.name == "PENDING"
    clock.t = 1030.0
    assert core.fire_timers() == 1
    assert core.jobs["a"].state.name == "ASSUMED" and nudged == ["a@n:0"]
    assert core.next_timer() is None
    rec.close()
    fired = [e for e in stimuli(tmp_path / "log.jsonl") if e["stimulus"] == "TimerFired"]
    assert [(e["at"], e["vid"]) for e in fired] == [(1030.0, 0)]


def test_wake_at_fires_on_the_real_timer_thread():
    start = time.time()
    core = SchedulerCore(Gate(make_policy("fifo").placer, open_at=start + 0.4), Store("sqlite://"))
    service = LiveService(core, Bridge())
    done = threading.Event()
    core.nudge = lambda *a: done.set()
    core.node_seen(NodeFacts("n", 2, "default", "", False))
    assert core.filter(pod("a", 1), ["n"])[0] == []
    thread = service.start_timers()
    try:
        assert done.wait(5.0), "the timer did not fire"
        assert time.time() - start >= 0.4
        assert core.jobs["a"].state.name == "ASSUMED"
    finally:
        service.stop()
        thread.join(2.0)
    assert not thread.is_alive()


SCRIPT = [(0, "add", "a", 2), (1, "add", "b", 4), (2, "add", "c", 4), (3, "add", "d", 1), (4, "add", "e", 2),
          (5, "fail", "c", 0), (30, "end", "b", 0), (45, "add", "f", 8), (50, "end", "a", 0), (55, "cordon", "n2", 0),
          (60, "end", "c", 0), (61, "end", "d", 0), (62, "uncordon", "n2", 0), (70, "end", "e", 0),
          (90, "add", "g", 3), (120, "end", "f", 0), (125, "end", "g", 0)]


def record_run(path, policy: str = "qssf", placement: str = "best-fit") -> SchedulerCore:
    """A live core driven as the watch and the extender drive it, on a controlled clock; one bind
    fails (c's, at t=5: it is nominated again) and a node is cordoned for a while."""
    clock = Clock(1_700_000_000.0)
    core = SchedulerCore(make_policy(policy, placement), Store("sqlite://"), clock=clock, recorder=Recorder(path))
    service = LiveService(core, Bridge())
    for name in ("n1", "n2"):
        core.node_seen(NodeFacts(name, 8, "default", "", False))
    for t, what, uid, gpus in SCRIPT:
        clock.t = 1_700_000_000.0 + t
        if what == "add":
            core.pod_seen(PodFacts(uid, "default", uid, gpus, created=clock.t))
        elif what == "fail":
            job = core.jobs[uid]
            core.end_bind(uid, core.state.node_ids[job.placement[0][0]], "conflict")
        elif what in ("cordon", "uncordon"):
            core.node_seen(NodeFacts(uid, 8, "default", "", what == "cordon"))
        else:
            core.pod_gone(uid)
        core.run_pass()
        for job_uid, job in list(core.jobs.items()):
            if job.state.name == "ASSUMED" and not (job_uid == "c" and t < 5):
                assert service.bind("default", job_uid, job_uid, core.state.node_ids[job.placement[0][0]]) == ""
    core.recorder.close()
    return core


def test_a_replay_of_stimuli_reproduces_every_nomination(tmp_path):
    from dlsched.service.feed import replay_stimuli

    log = tmp_path / "log.jsonl"
    core = record_run(log)
    assert core.counters == {} or "preemptions not carried out" not in core.counters
    result = replay_stimuli(log, make_policy)
    assert result.policy == "qssf" and result.first_difference is None and result.rate == 1.0
    # every pod nominated once, c twice (its first bind failed)
    assert [r[0] for r in result.recorded].count("c") == 2 and len(result.recorded) == 8
    assert result.replayed == result.recorded


def test_a_replay_with_another_policy_reports_its_first_difference(tmp_path):
    from dlsched.service.feed import replay_stimuli

    log = tmp_path / "log.jsonl"
    record_run(log)
    result = replay_stimuli(log, make_policy, "fifo", "spread")
    diff = result.first_difference
    assert diff is not None and result.rate < 1.0
    assert result.recorded[:diff["index"]] == result.replayed[:diff["index"]]
    assert diff["recorded"] != diff["replayed"]


def test_the_replay_cli_reports_agreement(tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    log = tmp_path / "log.jsonl"
    record_run(log)
    runner = CliRunner()
    ok = runner.invoke(app, ["replay", str(log), "--stimuli"])
    assert ok.exit_code == 0, ok.output
    assert "8 of 8 nominations agree (100.0%" in ok.output
    other = runner.invoke(app, ["replay", str(log), "--stimuli", "--policy", "fifo", "--placement", "spread"])
    assert other.exit_code == 0 and "first difference at nomination" in other.output
    bad = runner.invoke(app, ["replay", str(log), "--stimuli", "--out", str(tmp_path / "o")])
    assert bad.exit_code == 2 and "error: --out" in bad.output and "Traceback" not in bad.output
    none = runner.invoke(app, ["replay", str(log)])
    assert none.exit_code == 2 and "--out is needed" in none.output
