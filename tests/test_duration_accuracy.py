"""Online accuracy report and the ``dlsched estimate`` command."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import typer
from test_duration_toy import ORIGIN, toy_trace
from typer.testing import CliRunner

from dlsched.core.truth import duration as true_duration
from dlsched.predictors.duration.accuracy import duration_accuracy


@pytest.fixture(scope="module")
def report() -> dict:
    trace = toy_trace(1500, days=6, seed=7)
    return duration_accuracy(trace, list(map(true_duration, trace.jobs)), lam=0.1, n_estimators=30, min_train_jobs=50)


def test_estimates_beat_trivial_baselines(report: dict) -> None:
    m = report["methods"]
    assert report["evaluated"] > 1000 and report["refits"] >= 5
    for method in ("rolling", "gbdt", "combined"):
        for base in ("global_mean", "gpu_mean"):
            assert m[method]["spearman_gpu_time"] > m[base]["spearman_gpu_time"] + 0.2, (method, base)
            assert m[method]["median_abs_log_error"] < m[base]["median_abs_log_error"], (method, base)
            assert m[method]["mae_s"] < m[base]["mae_s"], (method, base)
    assert m["combined"]["spearman"] > 0.7


def test_report_describes_features_and_branches(report: dict) -> None:
    assert {"user", "vc", "name", "gpus", "weekday", "hour"} <= set(report["features"])
    assert report["rolling_branches"]["name_match"] > 1000
    assert {"combined", "combined_log"} <= set(report["methods"])
    json.dumps(report)          # JSON-serialisable for --json


def _write_helios_csv(path: Path) -> Path:
    from datetime import timedelta

    rows = ["job_id,user,vc,jobname,gpu_num,cpu_num,state,submit_time,duration"]
    for j in toy_trace(600, days=3, seed=8).jobs:
        t = (ORIGIN + timedelta(seconds=round(j.submit_time))).strftime("%Y-%m-%d %H:%M:%S")
        rows.append(f"{j.job_id},{j.user},{j.vc},{j.name},{j.gpus},{j.cpus},COMPLETED,{t},{int(true_duration(j))}")
    path.write_text("\n".join(rows) + "\n")
    return path


def _app() -> typer.Typer:
    from dlsched.cli import estimate_cmd

    app = typer.Typer()
    estimate_cmd.register(app)

    @app.command("noop")
    def _noop() -> None:  # a second command keeps "estimate" a named sub-command
        pass

    return app


def test_cli_json_and_table(tmp_path: Path) -> None:
    pytest.importorskip("dlsched.traces.api")
    path = _write_helios_csv(tmp_path / "cluster_log.csv")
    runner = CliRunner()
    res = runner.invoke(_app(), ["estimate", "--trace", str(path), "--n-estimators", "10", "--json"])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["jobs"] == 600 and out["origin"].startswith("2020-09-01")
    assert "user" in out["features"] and "name" in out["features"]
    res = runner.invoke(_app(), ["estimate", "--trace", str(path), "--n-estimators", "10", "--lam", "0.3",
                                 "--start", "2020-09-02"])
    assert res.exit_code == 0, res.output
    assert "P_M LightGBM" in res.output and "λ=0.3" in res.output


def test_cli_errors_are_clean(tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["estimate", "--trace", str(tmp_path / "missing.csv")])
    assert res.exit_code == 2 and "missing.csv" in res.output


def test_cli_builtin_synthetic_workload() -> None:
    pytest.importorskip("dlsched.traces.synthetic")
    res = CliRunner().invoke(_app(), ["estimate", "--jobs", "800", "--n-estimators", "10", "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["jobs"] > 0


@pytest.mark.slow
def test_philly_two_weeks_online(shared: Path) -> None:
    """Philly has no users or names: P_R uses the recent same-VC/GPU stream, the GBDT VC, GPUs, time."""
    from dlsched.traces import load_trace

    path = shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
    if not path.is_file():
        pytest.skip("Philly reference input absent")
    trace = load_trace(path, start="2017-10-01 00:00:00", end="2017-10-14 23:59:59")
    rep = duration_accuracy(trace, list(map(true_duration, trace.jobs)), n_estimators=30)
    m = rep["methods"]
    assert set(rep["features"]) <= {"vc", "gpus", "cpus", "month", "weekday", "hour", "minute"}
    assert "user" not in rep["features"] and "name" not in rep["features"]
    assert rep["rolling_branches"].get("name_match", 0) == 0
    # two weeks is little data for the GBDT; the recent-stream P_R carries the ranking
    assert m["rolling"]["spearman_gpu_time"] > m["gpu_mean"]["spearman_gpu_time"] + 0.2
    for method in ("rolling", "gbdt", "combined"):
        assert m[method]["median_abs_log_error"] < m["gpu_mean"]["median_abs_log_error"]
    assert m["combined"]["spearman_gpu_time"] > m["gpu_mean"]["spearman_gpu_time"]
