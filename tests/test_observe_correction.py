"""Predictions corrected by observation: after the warm-up, observed utilisation and memory replace
a running job's predictions, and a policy's decision changes accordingly."""

from __future__ import annotations

import json
import math

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.cluster import ClusterSpec, GpuType
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.sim import SimConfig, Simulator
from dlsched.sim.config import no_overhead
from dlsched.sim.observe import ObservedCorrection


def jobs() -> list[Job]:
    """A is predicted at 4,000 MiB but truly needs 12,000; B (predicted 6,000) arrives at 30."""
    a = Job("A", "v", 1, 0, 100, gpu_util=50.0, gpu_mem_mib=12_000)
    b = Job("B", "v", 1, 30, 10, gpu_util=30.0, gpu_mem_mib=3_000)
    a.pred_gpu_util, a.pred_gpu_mem_mib = 20.0, 4_000
    b.pred_gpu_util, b.pred_gpu_mem_mib = 40.0, 6_000
    return [a, b]


def run(job_list, warmup=None):
    cluster = ClusterSpec.from_vc_sizes({"v": 1}, gpus_per_node=1, gpu_type=GpuType("T", 16 * 1024))
    observers = (ObservedCorrection(warmup),) if warmup is not None else ()
    res = Simulator(cluster, make_policy("fifo", share=True),
                    SimConfig(check_invariants=True, preemption_overhead=no_overhead, max_jobs_per_gpu=2),
                    observers=observers).run(job_list)
    return {j.job_id: (j.start_time, j.end_time) for j in res.jobs}, observers


def test_the_decision_changes_after_the_warm_up():
    job_list = jobs()
    # no correction: the predictions (4,000 + 6,000 MiB) fit one 16 GiB GPU, B joins A at 30
    assert run(job_list)[0] == {"A": (0, 100), "B": (30, 40)}
    # warm-up 20 s: at 30 A is known to need 12,000 MiB; B no longer fits beside it and waits
    times, (obs,) = run(job_list, warmup=20)
    assert times == {"A": (0, 100), "B": (100, 110)}
    a, b = job_list
    assert (a.pred_gpu_util, a.pred_gpu_mem_mib) == (50.0, 12_000)
    assert (a.prior_gpu_util, a.prior_gpu_mem_mib, a.observed_at) == (20.0, 4_000, 20.0)
    assert b.observed_at == -1.0 and obs.corrected == 1  # B ran 10 s, less than the warm-up
    # warm-up 40 s: B arrives before A has been watched long enough, it joins as without correction
    assert run(job_list, warmup=40)[0] == {"A": (0, 100), "B": (30, 40)}


def test_a_new_run_starts_from_the_priors():
    job_list = jobs()
    run(job_list, warmup=0)
    assert job_list[0].pred_gpu_mem_mib == 12_000
    for job in job_list:
        job.reset()
    a = job_list[0]
    assert (a.pred_gpu_util, a.pred_gpu_mem_mib, a.observed_at) == (20.0, 4_000, -1.0)
    assert math.isnan(a.prior_gpu_util)


def test_a_job_stopped_before_the_warm_up_is_not_observed_and_nan_measurements_keep_predictions():
    obs = ObservedCorrection(30)
    obs.attach(None)
    j = Job("j", "v", 1, 0, 100, gpu_util=70.0)  # memory never measured
    j.pred_gpu_util, j.pred_gpu_mem_mib = 10.0, 500.0
    obs.started(j, None, 0.0)
    obs.stopped(j, None, 10.0, "preempt")
    obs.submitted(Job("k", "v", 1, 50, 1), None, 50.0)
    assert j.observed_at == -1.0 and j.pred_gpu_util == 10.0
    obs.started(j, None, 60.0)
    obs.node_changed(0, 95.0)
    assert j.observed_at == 90.0 and j.pred_gpu_util == 70.0 and j.pred_gpu_mem_mib == 500.0
    assert obs.summary(None) == {"observe_after": 30.0, "predictions_corrected": 1}
    with pytest.raises(ValueError, match="must be >= 0"):
        ObservedCorrection(-1)


def test_a_memory_only_oom_observation_does_not_end_the_watch():
    """An OOM beside j reports its memory at 5 (j stays watched); j is preempted at 10, before its
    30 s warm-up: on its restart at 60 it is watched again, its utilisation is observed at 90."""
    from dlsched.kernel.correction import observe

    obs = ObservedCorrection(30)
    obs.attach(None)
    j = Job("j", "v", 1, 0, 100, gpu_util=70.0, gpu_mem_mib=9_000.0)
    j.pred_gpu_util, j.pred_gpu_mem_mib = 10.0, 500.0
    obs.started(j, None, 0.0)
    assert observe(j, math.nan, 9_000.0, 5.0)
    assert (j.pred_gpu_util, j.pred_gpu_mem_mib, j.prior_gpu_mem_mib, j.observed_at) == (10.0, 9_000.0, 500.0, 5.0)
    obs.stopped(j, None, 10.0, "preempt")
    obs.started(j, None, 60.0)
    obs.node_changed(0, 95.0)
    assert (j.pred_gpu_util, j.observed_at, j.prior_gpu_util, j.prior_gpu_mem_mib) == (70.0, 90.0, 10.0, 500.0)
    obs.stopped(j, None, 100.0, "preempt")  # past the warm-up: not watched again
    obs.started(j, None, 120.0)
    obs.node_changed(0, 200.0)
    assert obs.corrected == 1


def _trace(tmp_path):
    path = tmp_path / "t.csv"
    path.write_text("job_id,vc,gpus,submit_time,duration,model_name,batch_size,gpu_util,gpu_mem_mib\n"
                    "a,v,1,0,100,resnet18_cifar,32,50,12000\nb,v,1,30,30,resnet18_cifar,32,30,3000\n")
    return path


def test_cli_observe_after(tmp_path):
    runner = CliRunner()
    out = tmp_path / "run"
    res = runner.invoke(app, ["simulate", "--trace", str(_trace(tmp_path)), "--nodes", "1", "--gpus-per-node", "1",
                              "--max-jobs-per-gpu", "2", "--predict-resources", "--gpu", "T4",
                              "--observe-after", "20", "--out", str(out)])
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    assert summary["predictions_corrected"] == 2 and summary["observe_after"] == 20
    assert "observation replaced the predictions of 2 jobs" in res.output
    header = (out / "jobs.csv").read_text().splitlines()[0]
    assert header.endswith("pred_gpu_util,pred_gpu_mem_mib,prior_gpu_util,prior_gpu_mem_mib,observed_at")
    bad = runner.invoke(app, ["simulate", "--jobs", "10", "--observe-after", "-5", "--out", str(tmp_path / "x")])
    assert bad.exit_code == 2
    assert bad.output.strip().splitlines()[-1] == "error: --observe-after must be >= 0 seconds, got -5.0"
