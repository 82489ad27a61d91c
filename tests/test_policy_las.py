"""The worked example: a least-attained-service order with options of its own, one file + one registry line."""

from __future__ import annotations

import pytest

from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.run import RunConfig, WorkloadConfig
from dlsched.run.build import build_run
from dlsched.run.params import policy
from dlsched.sched.policies.las import LasParams


def test_params_are_declared_and_checked():
    assert LasParams() == LasParams(threshold=28800.0, queues=3)
    with pytest.raises(ValueError, match="--param threshold must be a finite number > 0"):
        LasParams(threshold=0)
    assert policy("las", queues=2).params == LasParams(queues=2)


def test_a_user_with_more_attained_service_waits_behind_a_newcomer():
    las = make_policy("las", None, threshold=100.0, queues=2)
    queue = las.new_queue()
    heavy = Job("h2", "v", 1, 0.0, 10.0, user="heavy")
    fresh = Job("f1", "v", 1, 1.0, 10.0, user="fresh")
    done = Job("h1", "v", 4, 0.0, 50.0, user="heavy")
    done.start_time = 0.0
    for i, job in enumerate((heavy, fresh)):
        job.enq_seq = i
        queue.push(job)
    assert list(queue) == [heavy, fresh]             # no service yet: first come, first served
    las.job_finished(done, 50.0)                     # heavy attained 4 GPUs x 50 s = 200 >= threshold
    assert las.level_of("heavy") == 1 and las.level_of("fresh") == 0
    assert list(queue) == [fresh, heavy] and queue.head() is fresh


def test_las_runs_every_job_once_through_build_run(tmp_path):
    run = build_run(RunConfig(workload=WorkloadConfig(jobs=300), policy=policy("las", threshold=600.0)))
    summary = run.simulate(tmp_path)
    assert summary["jobs"] == 300 and summary["policy"] == "las"
    assert all(j.end_time >= j.start_time >= j.submit_time for j in run.inputs.jobs)


def test_the_command_line_lists_and_sets_its_parameters(tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    listing = CliRunner().invoke(app, ["policies"])
    assert listing.exit_code == 0 and "threshold=28800.0," in listing.output and "queues=3" in listing.output
    res = CliRunner().invoke(app, ["simulate", "--jobs", "200", "--policy", "las", "--param", "queues=1",
                                   "--out", str(tmp_path / "one")])
    fifo = CliRunner().invoke(app, ["simulate", "--jobs", "200", "--out", str(tmp_path / "fifo")])
    assert res.exit_code == 0 and fifo.exit_code == 0
    import json

    one = json.loads((tmp_path / "one" / "summary.json").read_text())
    base = json.loads((tmp_path / "fifo" / "summary.json").read_text())
    # one level: first come, first served, so the same schedule as FIFO
    assert (one["avg_jct"], one["makespan"]) == (base["avg_jct"], base["makespan"])
