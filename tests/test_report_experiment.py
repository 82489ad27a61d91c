"""`dlsched report` on a topology experiment's output directory (issue 12)."""

from __future__ import annotations

from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.report.layout import Layout, detect_layout


def test_report_on_topo_prototype_output(tmp_path) -> None:
    runner = CliRunner()
    assert runner.invoke(app, ["experiment", "topo-prototype", "--out", str(tmp_path)]).exit_code == 0
    assert detect_layout(tmp_path) is Layout.EXPERIMENT
    result = runner.invoke(app, ["report", str(tmp_path)])
    assert result.exit_code == 0, result.output
    page = (tmp_path / "report.html").read_text()
    assert "Topology experiment — topo-prototype" in page
    for policy in ("fcfs", "best-fit", "topo-aware", "topo-aware-p"):
        assert f"<th>{policy}</th>" in page
    # the six jobs of Table 1 under each of the four policies
    assert page.count('<th scope="row">fcfs</th>') == 6 and page.count('<th scope="row">topo-aware-p</th>') == 6
    assert "speed-up in cumulative time" in page
