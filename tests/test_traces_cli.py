"""``dlsched trace stats|convert|generate`` through Typer's test runner."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from dlsched.cli import trace_cmd
from dlsched.traces import load_trace

TR = Path(__file__).parent / "fixtures" / "traces"
runner = CliRunner()


def app() -> typer.Typer:
    root = typer.Typer()
    trace_cmd.register(root)

    @root.callback()
    def _main() -> None:  # keep "trace" as a sub-command
        pass

    return root


def test_stats_json_and_table():
    res = runner.invoke(app(), ["trace", "stats", str(TR / "helios_cluster_log.csv"), "--json"])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["jobs"] == 5
    res = runner.invoke(app(), ["trace", "stats", str(TR / "pollux.csv"), "-f", "philly-pollux"])
    assert res.exit_code == 0 and "duration groups (Helios Table 4)" in res.stdout


def test_stats_plots(tmp_path):
    res = runner.invoke(app(), ["trace", "stats", str(TR / "helios_cluster_log.csv"), "--plot", str(tmp_path)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in tmp_path.glob("*.png")) == [
        "arrivals_hourly.png", "duration_cdf.png", "gpu_mix.png", "vc_gpu_time.png"]


def test_error_exit_code_and_skip_invalid(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("user,vc,jobname,gpu_num,state,submit_time,start_time,end_time,duration\n"
                   "u,v,j1,two,Pass,2017-10-01 00:00:00,,,5\nu,v,j2,1,Pass,2017-10-01 00:00:01,,,5\n")
    res = runner.invoke(app(), ["trace", "stats", str(bad)])
    assert res.exit_code == 2
    assert "line 2, column 'gpu_num': not an integer: 'two'" in res.stderr.replace("\n", "")
    assert "Traceback" not in res.output
    out = tmp_path / "ok.parquet"
    res = runner.invoke(app(), ["trace", "convert", str(bad), str(out), "--skip-invalid"])
    assert res.exit_code == 0
    assert "skipped 1 invalid rows: gpu_num: not an integer" in res.stderr
    assert [j.job_id for j in load_trace(out).jobs] == ["j2"]


def test_convert_window_and_generate(tmp_path):
    out = tmp_path / "w.csv"
    res = runner.invoke(app(), ["trace", "convert", str(TR / "helios_log.csv"), str(out), "--vc-config",
                                str(TR / "vc_config.csv"), "--start", "2017-10-01 00:00:00",
                                "--end", "2017-11-30 23:59:00"])
    assert res.exit_code == 0, res.output
    assert "left out 1 rows: VC not in config" in res.stderr
    assert [j.job_id for j in load_trace(out).jobs] == ["sia_000003", "sia_000005", "sia_000006"]
    syn = tmp_path / "s.parquet"
    res = runner.invoke(app(), ["trace", "generate", str(syn), "--jobs", "500", "--seed", "3"])
    assert res.exit_code == 0, res.output
    assert len(load_trace(syn)) == 500
