"""The kernel's options from the command line: sharing, ground-truth models, weighted placements."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

runner = CliRunner()


@pytest.mark.parametrize("args,message", [
    (["--max-jobs-per-gpu", "0"], "--max-jobs-per-gpu must be >= 1, got 0"),
    (["--speed-model", "warp"], "unknown --speed-model 'warp'"),
    (["--failure-model", "meteor"], "unknown --failure-model 'meteor'"),
    (["--placement", "best-fit:zero"], "the weight after ':' must be a number"),
    (["--gpu", "Z80", "--failure-model", "oom"], "unknown GPU type 'Z80'"),
    (["--policy", "coscheml", "--interference-model", "tea-leaves"], "unknown --interference-model 'tea-leaves'"),
])
def test_bad_kernel_options_fail_clearly(args, message, tmp_path):
    res = runner.invoke(app, ["simulate", "--jobs", "50", *args, "--out", str(tmp_path)])
    assert res.exit_code == 2 and res.output.startswith("error: ") and message in res.output


def test_sharing_run_reports_its_ground_truth(tmp_path):
    trace = tmp_path / "t.csv"
    rows = [f"j{i},v,1,{i * 10},{100 + i}" for i in range(6)]
    trace.write_text("job_id,vc,gpus,submit_time,duration\n" + "\n".join(rows) + "\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1",
                              "--speed-model", "time-sliced", "--failure-model", "oom",
                              "--placement", "best-fit:2,spread:1", "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    # one exclusive GPU: jobs run one after another at full speed, nobody fails
    assert summary["avg_slowdown"] == pytest.approx(1.0) and summary["failures"] == 0
    assert summary["placement"] == "best-fit:2+spread" and "speed model time-sliced" in res.output


def test_coscheml_interference_model_from_the_command_line(tmp_path):
    """--interference-model is documented in --help and reaches coscheml (the paper curve: no fit);
    other policies get a note that they ignore it."""
    from dlsched.run.build import load_inputs, run_spec
    from dlsched.run.options import configs_from_options

    assert "--interference-model" in runner.invoke(app, ["simulate", "--help"], terminal_width=200).output
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration\n" + "\n".join(f"j{i},v,1,{i},50" for i in range(4)) + "\n")
    args = ["--trace", str(trace), "--nodes", "1", "--gpus-per-node", "1", "--max-jobs-per-gpu", "2"]
    res = runner.invoke(app, ["simulate", *args, "--policy", "coscheml", "--interference-model", "horus-paper-curve",
                              "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    res = runner.invoke(app, ["simulate", *args, "--interference-model", "pair-forest", "--out", str(tmp_path / "f")])
    assert res.exit_code == 0 and "--interference-model is read only by coscheml" in res.output
    configs, unread = configs_from_options({"trace": trace, "nodes": 1, "gpus_per_node": 1, "profiles": "builtin",
                                            "interference_model": "horus-curve"}, ["coscheml", "fifo"])
    inputs = load_inputs(configs[0])
    cosch, fifo = (run_spec(c, inputs) for c in configs)
    assert cosch.policy_options == {"window": 64, "model": "horus-curve", "profiles": "builtin"}
    assert fifo.policy_options == {} and unread == []
