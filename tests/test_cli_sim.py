"""The simulate / compare / demo / policies commands, as a user runs them."""

from __future__ import annotations

import json

import pandas as pd
import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

runner = CliRunner()
JOB_COLUMNS = ["job_id", "vc", "gpus", "submit_time", "start_time", "end_time", "queue_delay", "jct", "preemptions"]
SUMMARY_KEYS = {"jobs", "avg_jct", "avg_queue_delay", "queued_jobs", "makespan", "gpu_utilization"}


def test_simulate_builtin_workload(tmp_path):
    res = runner.invoke(app, ["simulate", "--jobs", "1500", "--policy", "sjf", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    jobs = pd.read_csv(tmp_path / "jobs.csv")
    assert list(jobs.columns[:3]) == ["job_id", "user", "name"] and set(JOB_COLUMNS) <= set(jobs.columns)
    assert len(jobs) == 1500 and (jobs.jct == jobs.end_time - jobs.submit_time).all()
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert set(summary) >= SUMMARY_KEYS and summary["jobs"] == 1500 and summary["policy"] == "sjf"
    assert summary["avg_jct"] == pytest.approx(jobs.jct.mean())
    assert set(summary["groups"]) == {"short", "middle", "long"}
    timeline = pd.read_csv(tmp_path / "timeline.csv")
    assert (timeline.busy_gpus <= timeline.total_gpus).all()


def test_compare_writes_each_policy_and_ratios(tmp_path):
    res = runner.invoke(app, ["compare", "--jobs", "1500", "--policies", "fifo,sjf,qssf", "--processes", "1",
                              "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    table = pd.read_csv(tmp_path / "summary.csv")
    assert list(table.policy) == ["fifo", "sjf", "qssf"]
    assert table.ratio_avg_jct[0] == 1.0
    for policy in ("fifo", "sjf", "qssf"):
        assert (tmp_path / policy / "jobs.csv").is_file()
        summary = json.loads((tmp_path / policy / "summary.json").read_text())
        row = table[table.policy == policy].iloc[0]
        assert row.avg_jct == pytest.approx(summary["avg_jct"])


def test_simulate_philly_window_with_energy(tmp_path, shared):
    trace = shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--trace-format", "helios-log",
                              "--vc-config", str(shared / "traces/philly/philly_vc_config.csv"),
                              "--start", "2017-10-01 00:00:00", "--end", "2017-10-03 23:59:00",
                              "--policy", "fifo", "--energy", "vanilla", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["energy"]["avg_powered_off_nodes"] > 0 and summary["jobs"] > 1000


@pytest.mark.parametrize("args,message", [
    (["simulate", "--trace", "/nonexistent/trace.csv"], "no such file"),
    (["simulate", "--jobs", "100", "--policy", "nope"], "unknown policy 'nope'"),
    (["simulate", "--jobs", "100", "--placement", "nope"], "unknown placement 'nope'"),
    (["simulate", "--jobs", "100", "--compat", "slurm"], "unknown compat mode"),
    (["simulate", "--jobs", "100", "--policy", "fifo", "--priority-file", "x.csv"], "is for the policies whose parameters include it (qssf), not fifo"),
])
def test_bad_requests_fail_clearly(args, message, tmp_path):
    res = runner.invoke(app, args + ["--out", str(tmp_path)])
    assert res.exit_code == 2
    assert message in res.output
    assert "Traceback" not in res.output


def test_bad_vc_config_names_file_and_line(tmp_path):
    bad = tmp_path / "vcs.csv"
    bad.write_text("vc,node num\na,4\nb,zero\n")
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration\n1,a,1,0,10\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--vc-config", str(bad), "--out", str(tmp_path)])
    assert res.exit_code == 2
    assert "vcs.csv, line 3" in res.output and "node num" in res.output


def test_trace_without_cluster_size_is_refused(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration\n1,a,1,0,10\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "--vc-config" in res.output
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--nodes", "1", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output


def test_policies_lists_registry():
    res = runner.invoke(app, ["policies"])
    assert res.exit_code == 0
    for name in ("fifo", "sjf", "srtf", "qssf", "consolidate", "topo-aware-p"):
        assert name in res.output


def test_demo_writes_report(tmp_path):
    res = runner.invoke(app, ["demo", "--jobs", "1200", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert (tmp_path / "report.html").is_file() and (tmp_path / "summary.csv").is_file()
    assert "report:" in res.output


def test_predict_resources_fills_job_predictions(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration,model_name,batch_size\n"
                     "a,v,1,0,10,neumf,256\nb,v,1,5,10,no_such_model,32\nc,v,1,6,10,,\n")
    res = runner.invoke(app, ["simulate", "--trace", str(trace), "--nodes", "1", "--predict-resources",
                              "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert "for 1 of 3 jobs (1 have no model reference; unresolved models: no_such_model)" in res.output
    jobs = pd.read_csv(tmp_path / "o" / "jobs.csv").set_index("job_id")
    assert jobs.loc["a", "pred_gpu_mem_mib"] > 0 and 0 <= jobs.loc["a", "pred_gpu_util"] <= 100
    assert jobs.loc[["b", "c"], "pred_gpu_util"].isna().all()
