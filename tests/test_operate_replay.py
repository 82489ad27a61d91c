"""Record and replay: the service's event log through the simulator reproduces its decisions.

The service core is driven as the extender and watch drive it (a pod arrives and a pass runs at
once; a bind confirms; a pod ends and the next pass runs at that instant), on a controlled clock."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlalchemy")
from support.live_app import FakeBridge
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.truth import duration as true_duration
from dlsched.registry import make_policy
from dlsched.run.replay import replay
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.record import Recorder, read_events
from dlsched.service.replay import load_log
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

T0 = 1_700_000_000.0
# (time, event, pod, GPUs): arrivals and ends as the live cluster saw them
SCRIPT = [(0, "add", "a", 2), (1, "add", "b", 4), (2, "add", "c", 4), (3, "add", "d", 1), (4, "add", "e", 2),
          (30, "end", "b", 0), (45, "add", "f", 8), (50, "end", "a", 0), (60, "end", "c", 0), (61, "end", "d", 0),
          (70, "end", "e", 0), (90, "add", "g", 3), (120, "end", "f", 0), (125, "end", "g", 0)]


def run_live(log_path, policy: str = "fifo", placement: str = "consolidate") -> LiveService:
    now = [T0]
    core = SchedulerCore(make_policy(policy, placement), Store("sqlite://"), clock=lambda: now[0],
                         recorder=Recorder(log_path))
    service = LiveService(core, FakeBridge())
    for name in ("n1", "n2"):
        core.node_seen(NodeFacts(name, 8, "default", "", False))
    for t, what, uid, gpus in SCRIPT:
        now[0] = T0 + t
        if what == "add":
            core.pod_seen(PodFacts(uid, "default", uid, gpus, created=T0 + t))
        else:
            core.pod_gone(uid)
        core.run_pass()
        for job_uid, job in list(core.jobs.items()):
            if job.state.name == "ASSUMED":
                node = core.state.node_ids[job.placement[0][0]]
                assert service.bind("default", job_uid, job_uid, node) == ""
    core.recorder.close()
    return service


@pytest.fixture()
def recorded(tmp_path):
    log = tmp_path / "events.jsonl"
    service = run_live(log)
    return log, service


def test_the_log_holds_what_the_service_saw_and_decided(recorded):
    log, service = recorded
    events = read_events(log)
    kinds = [e["kind"] for e in events]
    assert kinds[0] == "config" and events[0]["policy"] == "fifo" and events[0]["placement"] == "consolidate"
    assert kinds.count("node") == 2 and kinds.count("submit") == 7 and kinds.count("finish") == 7
    assert kinds.count("start") == kinds.count("confirm") == 7
    starts = [(e["uid"], e["node"], e["gpus"], e["at"] - T0) for e in events if e["kind"] == "start"]
    # consolidate: a, b, d on n1 and c, e on n2; f (8 GPUs) waits for a whole node: n1 at 61
    assert [(s[0], s[1]) for s in starts] == [("a", "n1"), ("b", "n1"), ("c", "n2"), ("d", "n1"), ("e", "n2"),
                                              ("f", "n1"), ("g", "n2")]
    assert dict((s[0], s[3]) for s in starts) == {"a": 0, "b": 1, "c": 2, "d": 3, "e": 4, "f": 61, "g": 90}
    rec = load_log(log)
    assert [(j.job_id, j.submit_time, true_duration(j)) for j in rec.jobs] == [
        ("a", 0, 50), ("b", 1, 29), ("c", 2, 58), ("d", 3, 58), ("e", 4, 66), ("f", 45, 59), ("g", 90, 35)]
    assert [n.node_id for n in rec.cluster.nodes] == ["n1", "n2"] and rec.left_out == {}


def test_replay_with_the_recorded_policy_reproduces_its_decisions(recorded, tmp_path):
    log, _ = recorded
    out = tmp_path / "run"
    summary = replay(log, out)
    assert summary["policy"] == "fifo" and summary["jobs"] == 7
    simulated = [json.loads(line) for line in (out / "decisions.jsonl").read_text().splitlines()]
    recorded_starts = [json.loads(line) for line in (out / "recorded_decisions.jsonl").read_text().splitlines()]
    assert simulated == recorded_starts          # same order, same time, same node, same GPU indices
    assert [s["uid"] for s in simulated] == ["a", "b", "c", "d", "e", "f", "g"]
    assert (simulated[5]["uid"], simulated[5]["node"], simulated[5]["gpus"], simulated[5]["at"]) == \
        ("f", "n1", list(range(8)), 61)


def test_replay_under_another_policy_and_report(recorded, tmp_path):
    log, _ = recorded
    runner = CliRunner()
    out = tmp_path / "sjf"
    res = runner.invoke(app, ["replay", str(log), "--policy", "sjf", "--out", str(out)])
    assert res.exit_code == 0, res.output
    assert "replayed 7 jobs with sjf" in res.output
    starts = [json.loads(line)["uid"] for line in (out / "decisions.jsonl").read_text().splitlines()]
    assert sorted(starts) == ["a", "b", "c", "d", "e", "f", "g"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["recorded_policy"] == "fifo" and summary["policy"] == "sjf"
    res = runner.invoke(app, ["report", str(out)])
    assert res.exit_code == 0, res.output
    assert (out / "report.html").stat().st_size > 1000


def test_replay_errors_are_one_line(tmp_path):
    runner = CliRunner()
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n{}\n")
    res = runner.invoke(app, ["replay", str(bad), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and res.output.strip().splitlines()[-1].startswith("error: ")
    assert "line 1" in res.output
    res = runner.invoke(app, ["replay", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "LOG:" in res.output
    good = tmp_path / "events.jsonl"
    run_live(good)
    res = runner.invoke(app, ["replay", str(good), "--policy", "nope", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "error: --policy: unknown policy 'nope'" in res.output


def test_replay_builds_the_run_simulate_describes(recorded, tmp_path):
    """The replayed run is a RunConfig: the log as input, the recorded policy, placement and
    sharing; another policy with --param gets its own parameters, checked like simulate's."""
    from dlsched.run.config import ModelsConfig, PlacementConfig, RunConfig, WorkloadConfig
    from dlsched.run.options import configs_from_options
    from dlsched.run.replay import log_inputs, replay_config

    log, _ = recorded
    _, rec = log_inputs(log)
    assert replay_config(log, rec.config) == RunConfig(workload=WorkloadConfig(replay_log=log),
                                                       placement=PlacementConfig("consolidate"),
                                                       models=ModelsConfig(speed="none"))
    [by_flags], _ = configs_from_options({"policy": "horus", "param": ["beta=4"], "speed_model": "none"})
    chosen = replay_config(log, rec.config, "horus", params={"beta": "4"})
    assert chosen.policy == by_flags.policy and chosen.placement == by_flags.placement
    assert chosen.models == by_flags.models and chosen.engine == by_flags.engine
    runner = CliRunner()
    res = runner.invoke(app, ["replay", str(log), "--policy", "horus", "--param", "window=3",
                              "--out", str(tmp_path / "h")])
    assert res.exit_code == 2 and "error: policy horus has no parameter 'window' (horus declares k, beta, rounds)" \
        in res.output
    res = runner.invoke(app, ["replay", str(log), "--policy", "horus", "--param", "beta=4", "--out",
                              str(tmp_path / "h")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "h" / "summary.json").read_text())
    assert summary["policy"] == "horus" and summary["jobs"] == 7 and summary["replay_of"] == str(log)
