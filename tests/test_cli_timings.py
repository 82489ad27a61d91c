"""``dlsched simulate --timings``: where the wall time of the whole command goes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

runner = CliRunner()


def test_simulate_timings_breakdown(tmp_path):
    res = runner.invoke(app, ["simulate", "--jobs", "800", "--out", str(tmp_path / "t"), "--timings"])
    assert res.exit_code == 0, res.output
    timings = json.loads((tmp_path / "t" / "summary.json").read_text())["timings"]
    assert list(timings) == ["start_up", "load", "simulate", "write", "total"]
    assert all(v >= 0 for v in timings.values())
    assert timings["total"] == pytest.approx(sum(v for k, v in timings.items() if k != "total"), abs=0.005)
    assert "timings: start-up" in res.output and "total" in res.output

    plain = runner.invoke(app, ["simulate", "--jobs", "800", "--out", str(tmp_path / "p")])
    assert plain.exit_code == 0
    assert "timings" not in json.loads((tmp_path / "p" / "summary.json").read_text())
    assert "timings:" not in plain.output
