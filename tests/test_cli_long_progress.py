"""Issue 25: commands that can run for more than a few seconds draw the live progress line
(reproduce, energy replay, forecast, simulate --predict-resources), erased when they end."""

from __future__ import annotations

import time
from typing import ClassVar

import pytest
from typer.testing import CliRunner

from dlsched.cli import progress
from dlsched.cli.main import app
from dlsched.reproduce.base import Reproduction, Table


@pytest.fixture()
def terminal(monkeypatch):
    """Progress on, as on a terminal; lines every 50 ms."""
    monkeypatch.setattr(progress, "enabled", lambda *a, **k: True)
    original = progress.Activity.__init__

    def fast(self, label, on, stream=None, interval=0.5):
        original(self, label, on, stream, 0.05)

    monkeypatch.setattr(progress.Activity, "__init__", fast)


class Slow(Reproduction):
    name: ClassVar[str] = "slow-test"
    title: ClassVar[str] = "a slow reproduction"
    paper: ClassVar[str] = "none"
    command: ClassVar[str] = "sleep"

    def run(self, ctx):
        time.sleep(0.3)
        return [Table("t", ["a", "b"], [["x", 1]])], []


def test_reproduce_draws_progress(terminal, monkeypatch, tmp_path) -> None:
    from dlsched.reproduce import registry

    monkeypatch.setitem(registry.REPRODUCTIONS, "slow-test", Slow())
    result = CliRunner().invoke(app, ["reproduce", "slow-test", "--shared", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "\r\x1b[2Kreproduce slow-test  working  0 s" in result.output


def test_energy_replay_and_forecast_draw_progress(terminal, tmp_path) -> None:
    import datetime as dt

    t0 = dt.datetime(2020, 1, 1)
    rows = [f"{t0 + dt.timedelta(minutes=10 * i):%Y-%m-%d %H:%M},{(i * 7) % 20},30" for i in range(3000)]
    series = tmp_path / "series.csv"
    series.write_text("time,active,total\n" + "\n".join(rows) + "\n")
    result = CliRunner().invoke(app, ["energy", "replay", "--series", str(series), "--out", str(tmp_path / "e")])
    assert result.exit_code == 0, result.output
    assert "\x1b[2Kenergy replay (ces)  working" in result.output
    result = CliRunner().invoke(app, ["forecast", "--series", str(series)])
    assert result.exit_code == 0, result.output
    assert "\x1b[2Kforecast: fitting and scoring  working" in result.output


def test_predict_resources_draws_progress(terminal, tmp_path) -> None:
    pytest.importorskip("onnx")
    result = CliRunner().invoke(app, ["simulate", "--jobs", "50", "--predict-resources", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "\x1b[2K--predict-resources: loading jobs, predicting  working" in result.output
