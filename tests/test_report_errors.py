"""Unusable directories fail with a message naming the missing or bad file; the CLI exits 2 without a traceback."""

from __future__ import annotations

import pytest
from support.report_fixtures import write_comparison, write_energy, write_run
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.report import ReportError, build_report

runner = CliRunner()


def test_missing_jobs_csv_is_named(tmp_path):
    write_run(tmp_path, "fifo", n=50)
    (tmp_path / "jobs.csv").unlink()
    with pytest.raises(ReportError, match=r"missing file: .*jobs\.csv"):
        build_report(tmp_path)


def test_energy_summary_without_series_names_series_csv(tmp_path):
    write_energy(tmp_path, days=1)
    (tmp_path / "series.csv").unlink()
    with pytest.raises(ReportError, match=r"series\.csv"):
        build_report(tmp_path)


def test_missing_policy_folder_is_named(tmp_path):
    write_comparison(tmp_path, n=50)
    for f in (tmp_path / "sjf").iterdir():
        f.unlink()
    (tmp_path / "sjf").rmdir()
    with pytest.raises(ReportError, match=r"sjf.*summary\.json"):
        build_report(tmp_path)


def test_bad_json_and_missing_column_are_named(tmp_path):
    write_run(tmp_path, "fifo", n=50)
    jobs = tmp_path / "jobs.csv"
    jobs.write_text("job_id,vc\n1,a\n")
    with pytest.raises(ReportError, match=r"jobs\.csv lacks column\(s\): jct, queue_delay"):
        build_report(tmp_path)
    (tmp_path / "summary.json").write_text("{not json")
    with pytest.raises(ReportError, match=r"summary\.json is not valid JSON"):
        build_report(tmp_path)


def test_cli_errors_exit_2_naming_the_file(tmp_path):
    res = runner.invoke(app, ["report", str(tmp_path)])
    assert res.exit_code == 2 and "summary.json" in res.output and "Traceback" not in res.output
    file = tmp_path / "x.txt"
    file.write_text("")
    res = runner.invoke(app, ["report", str(file)])
    assert res.exit_code == 2 and "not a directory" in res.output


def test_cli_out_option(tmp_path):
    write_run(tmp_path / "run", "fifo", n=50)
    out = tmp_path / "r.html"
    res = runner.invoke(app, ["report", str(tmp_path / "run"), "--out", str(out)])
    assert res.exit_code == 0 and str(out) in res.output.replace("\n", "") and out.is_file()
