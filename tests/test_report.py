"""`dlsched report`: one self-contained HTML page per run, comparison or energy directory."""

from __future__ import annotations

import json
import re

import pytest
from support.report_fixtures import write_energy
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.report import ReportError, build_report

runner = CliRunner()


@pytest.fixture(scope="module")
def comparison(tmp_path_factory):
    out = tmp_path_factory.mktemp("cmp")
    res = runner.invoke(app, ["compare", "--jobs", "1500", "--policies", "fifo,sjf,srtf", "--processes", "1",
                              "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


def _images(html: str) -> int:
    return len(re.findall(r'<img[^>]+src="data:image/png;base64,', html))


def test_comparison_report_has_plots_tables_and_numbers(comparison):
    path = build_report(comparison)
    html = path.read_text()
    assert path == comparison / "report.html"
    assert _images(html) >= 3  # JCT CDF, queue delay per VC, utilisation over time
    for section in ("JCT distribution", "Queue delay per VC", "Utilisation over time", "Helios Table 4"):
        assert section in html
    for policy in ("fifo", "sjf", "srtf"):
        summary = json.loads((comparison / policy / "summary.json").read_text())
        assert f"{summary['avg_jct']:.1f}" in html  # the summary table shows each policy's mean JCT
    assert "http://" not in html and "https://" not in html  # self-contained


def test_single_run_report(comparison, tmp_path):
    out = tmp_path / "one.html"
    path = build_report(comparison / "sjf", out)
    assert path == out and _images(out.read_text()) >= 2


def test_energy_replay_report(tmp_path):
    write_energy(tmp_path)
    html = build_report(tmp_path).read_text()
    assert _images(html) >= 1 and "powered" in html.lower()


def test_missing_files_are_named(tmp_path):
    with pytest.raises(ReportError, match="summary"):
        build_report(tmp_path)
    res = runner.invoke(app, ["report", str(tmp_path / "nope")])
    assert res.exit_code == 2 and "nope" in res.output and "Traceback" not in res.output


def test_cli_prints_where_the_report_is(comparison):
    res = runner.invoke(app, ["report", str(comparison)])
    assert res.exit_code == 0 and "report.html" in res.output
