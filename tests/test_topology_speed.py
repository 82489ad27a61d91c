"""The topology speed model on the main engine: hand-checked slowdowns, multi-node jobs, defaults."""

from __future__ import annotations

import json

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState
from dlsched.models.topology import TopologySpeed
from dlsched.registry import default_speed_model, make_placer, make_policy
from dlsched.sim import SimConfig, Simulator


def tiny(jid: str, gpus: int, arrival: float, solo: float) -> Job:
    return Job(jid, "v", gpus, arrival, solo, model_name="alexnet", batch_size=1)


def test_a_co_runner_slows_a_job_while_it_runs():
    """Two tiny 2-GPU AlexNets on one DGX-1 socket slow each other by 30 % (Fig. 6).

    A (100 s solo) runs alone for 10 s; B (50 s solo) joins on the same socket: both at 1/1.3,
    B ends 65 s later (t = 75) while A does 50 s of work; alone again, A does its last 40 s at
    full speed and ends at t = 115 (not 10 + 90 x 1.3 = 127)."""
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, 8, topology="dgx1")
    jobs = [tiny("a", 2, 0.0, 100.0), tiny("b", 2, 10.0, 50.0)]
    result = Simulator(cluster, make_policy("fifo", "first-fit-node"), SimConfig(check_invariants=True),
                       speed_model=TopologySpeed(cluster)).run(jobs)
    a, b = jobs
    assert a.placement is None and (a.start_time, b.start_time) == (0.0, 10.0)
    assert b.end_time == pytest.approx(75.0)
    assert a.end_time == pytest.approx(115.0)
    assert result.extra["avg_slowdown"] == pytest.approx((115 / 100 + 65 / 50) / 2)
    assert result.extra["jobs_slowed_over_5pct"] == 2


def test_jobs_on_different_sockets_do_not_interfere():
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, 8, topology="dgx1")
    jobs = [tiny("a", 4, 0.0, 100.0), tiny("b", 4, 0.0, 50.0)]   # GPUs 0-3 and 4-7: one socket each
    Simulator(cluster, make_policy("fifo", "first-fit-node"), SimConfig(),
              speed_model=TopologySpeed(cluster)).run(jobs)
    assert (jobs[0].end_time, jobs[1].end_time) == (100.0, 50.0)


def test_rate_of_multi_node_jobs():
    cluster = ClusterSpec.from_vc_sizes({"v": 3}, 8, topology="dgx1")
    state = ClusterState(cluster, new_queue=ArrivalQueue)
    model = TopologySpeed(cluster)

    def start(job: Job, placement) -> Job:
        state.submit(job, 0.0)
        state.start(job, placement, 0.0)
        return job

    x = start(tiny("x", 12, 0.0, 1.0), ((0, 0xFF), (1, 0x0F)))
    alone = model.rate(x, state)
    assert alone == 1.0                                  # a whole node + a cube face: the best 12-GPU placement
    other = start(tiny("other", 4, 0.0, 1.0), ((1, 0xF0),))
    assert model.rate(x, state) == alone                 # other socket of node 1, no network: no overlap
    assert model.rate(other, state) == 1.0               # a packed cube face, undisturbed
    state.finish(other, 0.0)
    y = start(tiny("y", 12, 0.0, 1.0), ((2, 0xFF), (1, 0xF0)))
    # x and y hold different sockets of node 1 but both cross the network: 30 % each (tiny/tiny)
    assert model.rate(x, state) == pytest.approx(1 / 1.3)
    assert model.rate(y, state) == pytest.approx(1 / 1.3)
    state.finish(y, 1.0)
    split = start(tiny("split", 2, 1.0, 1.0), ((2, 0b100001),))   # GPUs 0 and 5: other sockets, no NVLink
    assert 1 / 1.30 <= model.rate(split, state) < 1.0               # Fig. 4: up to the fully spread penalty


def test_postponements_are_counted_in_the_result():
    from dlsched.experiments.topology.evaluation import paper_cluster, paper_jobs
    from dlsched.experiments.topology.scenarios import prototype_jobs

    cluster = paper_cluster(1, "minsky")
    result = Simulator(cluster, make_policy("fifo", "topo-aware-p", backfill=True), SimConfig(),
                       speed_model=TopologySpeed(cluster)).run(paper_jobs(prototype_jobs()))
    assert result.extra["postponements"] == 3
    assert result.extra["speed_model"] == "topology" and result.extra["avg_slowdown"] < 1.02


def test_topology_placers_and_topology_default_the_speed_model():
    plain = ClusterSpec.from_vc_sizes({"v": 1}, 8)
    dgx = ClusterSpec.from_vc_sizes({"v": 1}, 8, topology="dgx1")
    assert default_speed_model(make_placer("consolidate"), plain) == "none"
    assert default_speed_model(make_placer("consolidate"), dgx) == "topology"
    assert default_speed_model(make_placer("topo-aware-p"), plain) == "topology"
    assert default_speed_model(make_placer("first-fit,topo-aware:2"), plain) == "topology"


def test_cli_simulate_reports_slowdowns(tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    runner = CliRunner()
    trace = tmp_path / "t.csv"
    rows = [f"j{i},v,{[1, 2, 4][i % 3]},{i * 5},{60 + i % 7 * 10},alexnet,{[1, 8, 64][i % 3]}" for i in range(40)]
    trace.write_text("job_id,vc,gpus,submit_time,duration,model_name,batch_size\n" + "\n".join(rows) + "\n")
    base = ["simulate", "--trace", str(trace), "--nodes", "2", "--placement", "topo-aware-p", "--backfill"]
    res = runner.invoke(app, [*base, "--topology", "dgx1", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    assert "speed model topology: slowdown" in res.output
    s = json.loads((tmp_path / "a" / "summary.json").read_text())
    assert s["speed_model"] == "topology" and s["avg_slowdown"] >= 1.0 and "postponements" in s
    res = runner.invoke(app, [*base, "--speed-model", "none", "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    assert "avg_slowdown" not in json.loads((tmp_path / "b" / "summary.json").read_text())
    res = runner.invoke(app, [*base, "--speed-model", "nope", "--out", str(tmp_path / "c")])
    assert res.exit_code == 2 and "error: unknown --speed-model" in res.output
    res = runner.invoke(app, [*base, "--topology", "nope", "--out", str(tmp_path / "d")])
    assert res.exit_code == 2 and "error:" in res.output
