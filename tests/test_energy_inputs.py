"""Occupancy-series loading and the CLI's answers to bad input: one clear line, exit 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import typer
from typer.testing import CliRunner

from dlsched.cli import energy_cmd
from dlsched.energy.series import SeriesError, load_node_series


def cli() -> typer.Typer:
    """A fresh app with only this module registered: the CLI code path without other commands."""
    app = typer.Typer(pretty_exceptions_enable=False)
    energy_cmd.register(app)
    return app


def write_series(path: Path, days: int = 10) -> Path:
    idx = pd.date_range("2020-03-02", periods=days * 1440, freq="1min")
    hours = idx.hour.to_numpy()
    active = (60 + 20 * np.sin(2 * np.pi * hours / 24)).round().astype(int)
    frame = pd.DataFrame({"time": idx.strftime("%Y-%m-%d %H:%M:%S"), "active": active, "total": 100})
    frame.to_csv(path, index=False)
    return path


@pytest.mark.parametrize("content, needle", [
    ("", "empty"),
    ("time,busy\n2020-01-01 00:00:00,1\n", "expected columns"),
    ("when,active,total\n2020-01-01 00:00:00,1,2\n", "missing column 'time'"),
    ("time,active,total\n2020-01-01 00:00:00,1,2\n2020-01-01 00:01:00,x,2\n", "line 3, column 'active'"),
    ("time,active,total\n2020-01-01 00:00:00,1,2\nyesterday,1,2\n", "line 3, column 'time'"),
    ("time,active,total\n2020-01-01 00:00:00,-4,2\n", "line 2, column 'active'"),
])
def test_bad_series_named_precisely(tmp_path: Path, content: str, needle: str) -> None:
    path = tmp_path / "bad.csv"
    path.write_text(content)
    with pytest.raises(SeriesError, match=needle) as info:
        load_node_series(path)
    assert str(path) in str(info.value)


def test_missing_and_corrupt_files(tmp_path: Path) -> None:
    with pytest.raises(SeriesError, match="file not found"):
        load_node_series(tmp_path / "nope.csv")
    corrupt = tmp_path / "x.csv.gz"
    corrupt.write_bytes(b"\x1f\x8b\x08garbage")
    with pytest.raises(SeriesError, match="not a readable CSV"):
        load_node_series(corrupt)


def test_resample_max_and_gpu_series(tmp_path: Path) -> None:
    path = tmp_path / "vc.csv.gz"
    rows = ["time,total_gpu_num,running_gpu_num"] + [f"2020-05-01 00:0{m}:00,64,{g}"
                                                      for m, g in enumerate([8, 9, 17, 3])]
    with gzip.open(path, "wt") as fh:
        fh.write("\n".join(rows) + "\n")
    s = load_node_series(path)
    assert s.active.tolist() == [3.0] and s.total.tolist() == [8.0]  # max(ceil(g / 8)) = ceil(17/8)


def test_cli_replay_writes_outputs(tmp_path: Path) -> None:
    series = write_series(tmp_path / "s.csv")
    out = tmp_path / "out"
    argv = ["energy", "replay", "--series", str(series), "--buffer", "5",
            "--eval-start", "2020-03-09", "--eval-end", "2020-03-10", "--out", str(out)]
    res = CliRunner().invoke(cli(), argv)
    assert res.exit_code == 0, res.output
    summary = json.loads((out / "summary.json").read_text())
    for key in ("avg_powered_off_nodes", "daily_wakeups", "nodes_per_wakeup", "node_util_before",
                "node_util_after", "smape", "rmse", "energy"):
        assert key in summary
    assert 0 <= summary["node_util_before"] <= summary["node_util_after"] <= 1
    assert summary["days"] == 2 and summary["train_end"] < "2020-03-09"
    frame = pd.read_csv(out / "series.csv")
    assert list(frame.columns[:4]) == ["time", "active", "predicted", "powered_on"] and len(frame) == 288


@pytest.mark.parametrize("args, needle", [
    (["--series", "{missing}"], "file not found"),
    (["--series", "{bad}"], "line 3, column 'active'"),
    (["--series", "{good}", "--eval-start", "2020-03-11", "--eval-end", "2020-03-10"], "window is empty"),
    (["--series", "{good}", "--eval-start", "2020-02-01"], "must lie inside the series"),
    (["--series", "{good}", "--eval-end", "tomorrow-ish"], "cannot parse"),
    (["--series", "{good}", "--policy", "magic"], "magic"),
])
def test_cli_errors_are_one_line_exit_2(tmp_path: Path, args: list[str], needle: str) -> None:
    good = write_series(tmp_path / "good.csv", days=3)
    bad = tmp_path / "bad.csv"
    bad.write_text("time,active,total\n2020-01-01 00:00:00,1,2\n2020-01-01 00:01:00,lots,2\n")
    paths = {"missing": tmp_path / "missing.csv", "bad": bad, "good": good}
    argv = [a.format(**paths) for a in args]
    for command in (["energy", "replay", "--out", str(tmp_path / "o"), *argv], ["forecast", *argv]):
        if "--policy" in argv and command[0] == "forecast":
            continue
        res = CliRunner().invoke(cli(), command)
        assert res.exit_code == 2, res.output
        assert needle in res.output and "Traceback" not in res.output
