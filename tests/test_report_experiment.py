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


def _energy_dir(folder, policy: str):
    import json

    folder.mkdir()
    (folder / "summary.json").write_text(json.dumps({
        "policy": policy, "avg_powered_off_nodes": 10.5, "daily_wakeups": 2.0, "smape": 4.8, "rmse": 22.4,
        "train_bins": 100, "forecast_horizon_steps": 18}))
    rows = ["time,active,predicted,powered_on,total"] + [
        f"2017-12-01 {h:02d}:00:00,{30 + h},{31 + h},{40 + h},100" for h in range(12)]
    (folder / "series.csv").write_text("\n".join(rows) + "\n")
    return folder


def test_vanilla_energy_report_shows_no_forecast(tmp_path) -> None:
    from dlsched.report import build_report

    vanilla = build_report(_energy_dir(tmp_path / "vanilla", "vanilla")).read_text()
    ces = build_report(_energy_dir(tmp_path / "ces", "ces")).read_text()
    for word in ("SMAPE", "RMSE", "forecast", "Train bins"):
        assert word.lower() not in vanilla.lower(), word
    assert "smape" in ces.lower() and "forecast" in ces.lower()
