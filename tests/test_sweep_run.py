"""Running sweeps locally: results equal `simulate`'s, failures recorded, resume after a kill."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pandas as pd
import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.sweep.engine_local import LocalEngine
from dlsched.sweep.run import run_sweep
from dlsched.sweep.spec import load_spec

runner = CliRunner()
SRC = Path(__file__).resolve().parents[1] / "src"


def _spec(tmp_path, text: str) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def _events(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / "events.jsonl").read_text().splitlines()]


def test_cells_match_simulate_and_a_failing_cell_does_not_stop_the_sweep(tmp_path):
    # nodes: 1 (8 GPUs) cannot hold the workload's 16-GPU jobs: that cell fails, the others run
    spec = load_spec(_spec(tmp_path, """
        base: {jobs: 300}
        grid:
          policy: [fifo, sjf]
          nodes: [32, 1]
        """))
    result = run_sweep(spec, tmp_path / "out", LocalEngine(2), emit=lambda line: None)
    table = result.table.set_index(["policy", "nodes"])
    assert (result.done, result.failed, result.skipped, result.workload_loads) == (2, 2, 0, 2)
    assert table.loc[("fifo", 1), "status"] == "failed"
    assert "could never run" in table.loc[("fifo", 1), "error"]
    # the same cell through `dlsched simulate`: identical figures
    res = runner.invoke(app, ["simulate", "--jobs", "300", "--nodes", "32", "--policy", "sjf",
                              "--out", str(tmp_path / "sim")])
    assert res.exit_code == 0, res.output
    direct = json.loads((tmp_path / "sim" / "summary.json").read_text())
    row = table.loc[("sjf", 32)]
    for key in ("jobs", "avg_jct", "p99_jct", "avg_queue_delay", "queued_jobs", "makespan", "gpu_utilization"):
        assert row[key] == pytest.approx(direct[key], rel=1e-12), key
    assert row["groups.short.avg_jct"] == pytest.approx(direct["groups"]["short"]["avg_jct"])
    assert row["wall_s"] > 0 and row["peak_rss_mib"] > 10
    # the parquet on disk is the table returned
    on_disk = pd.read_parquet(tmp_path / "out" / "results.parquet")
    assert list(on_disk["cell"]) == list(result.table["cell"])
    cell_dir = tmp_path / "out" / "cells" / row["cell"]
    assert {"jobs.csv", "summary.json", "timeline.csv", "done.json"} <= {p.name for p in cell_dir.iterdir()}


def test_rerun_skips_finished_cells_and_retries_failed_ones(tmp_path):
    path = _spec(tmp_path, "base: {jobs: 200}\ngrid:\n  nodes: [32, 1]\n")
    out = tmp_path / "out"
    first = run_sweep(load_spec(path), out, LocalEngine(1), emit=lambda line: None)
    assert (first.done, first.failed) == (1, 1)
    second = run_sweep(load_spec(path), out, LocalEngine(1), emit=lambda line: None)
    assert (second.skipped, second.done, second.failed) == (1, 0, 1)
    starts = [e["cell"] for e in _events(out) if e["event"] == "start"]
    failed_cell = first.table.loc[first.table["status"] == "failed", "cell"].item()
    assert sorted(starts) == sorted([*first.table["cell"], failed_cell])


def test_killed_sweep_resumes_without_running_a_finished_cell_twice(tmp_path):
    path = _spec(tmp_path, "base: {jobs: 2500, nodes: 24}\ngrid:\n  policy: [fifo, sjf]\n  seed: [0, 1, 2]\n")
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "dlsched.cli.main", "sweep", str(path), "--out", str(out), "--workers", "1"]
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(list(out.glob("cells/*/done.json"))) < 2:
            assert proc.poll() is None, "the sweep ended before it could be killed"
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)  # the coordinator and the cell it was running
        proc.wait()
    done_before = {p.parent.name for p in out.glob("cells/*/done.json")}
    assert 2 <= len(done_before) < 6
    first_run = {e["run"] for e in _events(out)}
    res = subprocess.run(cmd, check=False, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert f"{len(done_before)} finished earlier" in res.stderr
    events = _events(out)
    second = [e for e in events if e["run"] not in first_run]
    assert not {e["cell"] for e in second if e["event"] == "start"} & done_before
    done_counts: dict[str, int] = {}
    for e in events:
        if e["event"] == "done":
            done_counts[e["cell"]] = done_counts.get(e["cell"], 0) + 1
    # no cell finished twice; every cell finished once. A cell's done.json is written before the
    # coordinator logs its "done" event, so a SIGKILL between the two leaves a finished cell (not
    # run again: its done.json counts) without that line; such a cell is one of done_before.
    assert set(done_counts.values()) == {1}
    assert set(done_counts) | done_before == {p.parent.name for p in out.glob("cells/*/done.json")}
    assert len(set(done_counts) | done_before) == 6
    assert len(done_before - set(done_counts)) <= 1   # at most the cell that was finishing at the kill
    table = pd.read_parquet(out / "results.parquet")
    assert (table["status"] == "done").all() and len(table) == 6


def test_ctrl_c_stops_cleanly_and_keeps_what_finished(tmp_path):
    # cells of ~0.5 s each: with 2,500 jobs (0.06 s a cell) a loaded machine could finish all five
    # between the first done.json and the signal, and the run ended 0 instead of 130
    path = _spec(tmp_path, "base: {jobs: 20000, nodes: 24}\ngrid:\n  seed: [0, 1, 2, 3, 4, 5, 6, 7]\n")
    out = tmp_path / "out"
    env = {**os.environ, "PYTHONPATH": str(SRC), "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "dlsched.cli.main", "sweep", str(path), "--out", str(out)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not list(out.glob("cells/*/done.json")):
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted: finished cells are kept" in err and "Traceback" not in err
    table = pd.read_parquet(out / "results.parquet")
    assert (table["status"] == "done").sum() == len(list(out.glob("cells/*/done.json"))) >= 1


def test_cli_prints_progress_stats_and_writes_stats_parquet(tmp_path):
    path = _spec(tmp_path, """
        base: {jobs: 300, nodes: 32}
        grid:
          policy: [fifo, sjf]
          seed: [0, 1]
        baseline: {policy: fifo}
        """)
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--workers", "2"],
                        terminal_width=200)
    assert res.exit_code == 0, res.output
    assert "sweep: 4/4 done (0 earlier), 0 running, 0 failed" in res.output
    stats = pd.read_parquet(tmp_path / "out" / "stats.parquet").set_index("policy")
    table = pd.read_parquet(tmp_path / "out" / "results.parquet")
    sjf = table[table["policy"] == "sjf"]["avg_jct"]
    fifo = table[table["policy"] == "fifo"]["avg_jct"]
    assert stats.loc["sjf", "avg_jct.mean"] == pytest.approx(sjf.mean())
    assert stats.loc["sjf", "avg_jct.ratio"] == pytest.approx(sjf.mean() / fifo.mean())
    assert stats.loc["fifo", "avg_jct.ratio"] == 1.0
    assert stats.loc["sjf", "n"] == 2
