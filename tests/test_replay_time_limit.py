"""A ``--record`` log holding stops at a time limit reads and replays (issue 33): the limit's
``TimerFired`` (keyed by the job's uid, not a VC), the ``JobTimedOut`` stimulus and the
``time_limit`` / ``limit_due`` lines. Recorded by the real service code on a controlled clock: a
pod stopped by dlsched's eviction at its annotation limit, and one whose ``activeDeadlineSeconds``
the kubelet enforces. ``replay --stimuli`` agrees on every nomination and eviction, the
re-simulation reads each stopped job's run time up to its stop, and ``whatif LOG`` reads it too."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")
from test_replay_live import T0, assert_full_agreement, bind, recording_core, replayed
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.truth import duration
from dlsched.registry import make_policy
from dlsched.service import record
from dlsched.service.log import KINDS, STIMULI, read_log
from dlsched.service.pods import PodFacts
from dlsched.service.replay import load_log
from dlsched.service.whatif_log import state_at

LIMIT = {"dlsched.io/time-limit-seconds": "30", "dlsched.io/grace-seconds": "5"}


def pod(uid: str, gpus: int = 4, node: str = "", phase: str = "Pending", **kw) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, node, phase, False, T0, **kw)


def record_limits(path) -> None:
    """a: 30-s annotation limit, evicted by dlsched at T0+30, gone at T0+35; k: 60-s deadline, left to
    the kubelet, failed DeadlineExceeded at T0+96; b queued behind both, finished at T0+120."""
    core, clock, sent = recording_core(path, make_policy("fifo"), [("n1", 4, "default"), ("n2", 4, "default")])
    core.pod_seen(pod("a", annotations=LIMIT))
    core.pod_seen(pod("k", deadline_s=60))
    core.pod_seen(pod("b"))
    core.run_pass()
    bind(core, "a")
    bind(core, "k")
    core.pod_seen(pod("k", node="n2", phase="Running", deadline_s=60, started=T0 + 36))
    clock.t = T0 + 30
    assert core.fire_timers() == 1 and [i.uid for i in sent] == ["a"]
    core.eviction_sent(sent[0], "accepted")
    clock.t = T0 + 35
    core.pod_gone("a")
    core.run_pass()
    bind(core, "b")
    clock.t = T0 + 96
    core.fire_timers()   # k's limit is due: left to the kubelet (it has a status.startTime)
    core.pod_seen(pod("k", node="n2", phase="Failed", deadline_s=60, started=T0 + 36, reason="DeadlineExceeded"))
    core.run_pass()
    clock.t = T0 + 120
    core.pod_gone("b")
    core.run_pass()
    assert core.store.decision_counts()["time_limit"] == 2
    core.recorder.close()


def test_every_stimulus_the_recorder_decodes_is_one_the_reader_knows():
    decoded = {"JobSubmitted", "PassRequested", "TimerFired", "QueuesChanged", "NodeChanged", "GpuTypeChanged",
               "PredictionCorrected", "JobAdopted"} | set(record._WITH_REASON) | set(record._JOB_ONLY)
    assert decoded == set(STIMULI)


def test_a_log_with_time_limit_stops_reads_whole_and_replays_to_the_same_answer(tmp_path):
    path = tmp_path / "events.jsonl"
    record_limits(path)
    log = read_log(path)
    assert log.notes == []   # no line of an unknown kind left out
    kinds = [e["kind"] for e in log.events]
    assert kinds.count("time_limit") == 2 and kinds.count("limit_due") == 1 and "time_limit" in KINDS
    stimuli = [e.get("stimulus") for e in log.events]
    assert stimuli.count("JobTimedOut") == 2
    assert [e.get("limit") for e in log.events if e.get("stimulus") == "TimerFired"] == ["a", "k"]
    result = replayed(path)
    assert_full_agreement(result, 3, evictions=2)
    assert result.recorded_evictions == ["a", "k"]   # dlsched's eviction, then the one left to the kubelet


def test_the_re_simulation_ends_a_stopped_job_at_its_stop_and_the_cli_replays_it(tmp_path):
    path = tmp_path / "events.jsonl"
    record_limits(path)
    rec = load_log(path)
    runs = {j.job_id: duration(j) for j in rec.jobs}
    assert runs == {"a": 35.0, "k": 96.0, "b": 85.0}   # a and k up to their stop, not to the log's end
    assert rec.left_out == {}
    out = CliRunner().invoke(app, ["replay", str(path), "--stimuli"])
    assert out.exit_code == 0, out.output
    assert "3 of 3 nominations agree (100.0%" in out.output
    sim = CliRunner().invoke(app, ["replay", str(path), "--out", str(tmp_path / "run")])
    assert sim.exit_code == 0, sim.output


def test_whatif_reads_a_stopped_job_as_ended(tmp_path):
    path = tmp_path / "events.jsonl"
    record_limits(path)
    moment = state_at(path, make_policy("fifo"), at=40.0)
    assert set(moment.names) == {"k", "b"}   # a stopped at its limit at 35 s: not running, not pending
    assert moment.mean_run == 35.0           # its run counts as a run that ended
