"""The sharing experiments build their runs as every run is built (issue 21, point 1): a frozen
RunConfig through ``build_run``. What only they need -- a pool of the workload's nodes, the first
N jobs, perfect predictions, a fitted interference model -- are typed fields of that value."""

from __future__ import annotations

import dataclasses
import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core import truth
from dlsched.experiments.sharing.run import PolicyRun, run, run_config
from dlsched.experiments.sharing.tables import coscheml_model
from dlsched.models.truth import resolve_truth
from dlsched.run import config as C
from dlsched.run.build import build_run
from dlsched.run.options import configs_from_options
from dlsched.run.workload import TOO_WIDE

runner = CliRunner()


def test_a_sharing_run_is_the_run_simulate_describes(tmp_path):
    """The experiment's run of OBP on coscheml-30 is the RunConfig `simulate` builds from the same
    choices, and gives the same makespan and failures."""
    options = {"workload": "coscheml-30", "policy": "obp", "max_jobs_per_gpu": 2, "speed_model": "colocation",
               "failure_model": "oom", "profiles": "builtin", "predict_resources": True,
               "preemption_overhead": 0.0}
    [from_flags], _ = configs_from_options(options)
    assert run_config("coscheml-30", PolicyRun("OBP", "obp", 2), 0) == from_flags
    argv = [x for k, v in options.items()
            for x in ([f"--{k.replace('_', '-')}"] if v is True else [f"--{k.replace('_', '-')}", str(v)])]
    result = runner.invoke(app, ["simulate", *argv, "--out", str(tmp_path / "r")])
    assert result.exit_code == 0, result.output
    summary = json.loads((tmp_path / "r" / "summary.json").read_text())
    metrics = run("coscheml-30", PolicyRun("OBP", "obp", 2), 0).metrics
    assert summary["makespan"] == metrics["makespan"] and summary.get("failures", 0) == metrics["failures"]


def test_the_harness_objects_and_choices_are_fields_of_the_frozen_config():
    model = coscheml_model("TitanXp", resolve_truth())
    config = run_config("coscheml-30", PolicyRun("C", "coscheml", 2, (("model", model), ("window", 8))), 1,
                        predictions="perfect", truth=resolve_truth("builtin-raw"))
    assert config.policy.params.window == 8 and config.policy.objects == (("model", model),)
    assert config.workload.perfect_predictions and not config.workload.predicts
    assert config.models == C.ModelsConfig(speed="colocation", failure="oom", profiles="builtin-raw")
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.workload.seed = 2  # type: ignore[misc]
    built = build_run(config)
    policy = built.engine().simulator.policy
    assert policy.model is model and policy.window == 8  # the fitted model reaches the policy as given
    assert all(j.pred_gpu_util == truth.gpu_util(j) for j in built.inputs.jobs)  # perfect predictions


@pytest.mark.parametrize(("make", "key"), [
    (lambda: C.RunConfig(cluster=C.ClusterConfig(pool=2)), "pool"),
    (lambda: C.ClusterConfig(pool=2, nodes=3), "pool"),
    (lambda: C.ClusterConfig(pool=0), "pool"),
    (lambda: C.WorkloadConfig(workload_jobs=10), "workload"),
    (lambda: C.WorkloadConfig(workload="coscheml-30", workload_jobs=0), "workload_jobs"),
    (lambda: C.WorkloadConfig(workload="coscheml-30", perfect_predictions=True, predict_resources=True),
     "predict_resources"),
])
def test_the_harness_fields_are_checked_when_built(make, key):
    with pytest.raises(C.OptionError) as err:
        make()
    assert err.value.key == key


def test_a_pool_leaves_out_and_counts_the_jobs_wider_than_it(shared):
    from dlsched.workloads import make_workload

    config = run_config("philly-profiled", PolicyRun("FIFO", "fifo", 1), 0, jobs=1500, nodes=1)
    built = build_run(config)
    wide = sum(1 for j in make_workload("philly-profiled", seed=0, jobs=1500).trace.jobs if j.gpus > 8)
    assert wide > 0 and built.inputs.filtered == {TOO_WIDE: wide}
    assert len(built.inputs.jobs) == 1500 - wide and {j.vc for j in built.inputs.jobs} == {"all"}
    assert built.cluster.total_gpus == 8
    metrics = run("philly-profiled", PolicyRun("FIFO", "fifo", 1), 0, jobs=1500, nodes=1).metrics
    assert metrics["left_out_too_wide"] == wide
