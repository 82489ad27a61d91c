"""Sweep specs: expansion into cells and errors that name the file, line and key."""

from __future__ import annotations

import textwrap

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.sweep.options import simulate_options
from dlsched.sweep.run import validate
from dlsched.sweep.spec import SpecError, load_spec, parse_baseline

runner = CliRunner()


def _spec(tmp_path, text: str):
    path = tmp_path / "spec.yaml"
    path.write_text(textwrap.dedent(text))
    return path


def test_every_simulate_option_is_sweepable_and_nothing_else():
    options = simulate_options()
    assert {"policy", "placement", "nodes", "seed", "jobs", "max_jobs_per_gpu", "predict_resources",
            "energy", "boot_delay", "trace", "lam"} <= set(options)
    assert "out_dir" not in options and "timings" not in options
    assert options["nodes"].kind is int and options["nodes"].optional
    assert options["lam"].default == 0.1


def test_grid_times_base_plus_runs_and_duplicates_run_once(tmp_path):
    spec = load_spec(_spec(tmp_path, """
        base: {jobs: 300, nodes: 8}
        grid:
          policy: [fifo, sjf]
          seed: [0, 1, 2]
        runs:
          - {policy: srtf}
          - {policy: sjf, seed: 2}      # already in the grid
          - {policy: fifo, seed: 0, lam: 0.1}   # lam's default: the same cell again
        """))
    assert len(spec.cells) == 7 and spec.duplicates == 2
    assert spec.cells[0].params == {"jobs": 300, "nodes": 8, "policy": "fifo", "seed": 0}
    assert spec.cells[-1].params == {"jobs": 300, "nodes": 8, "policy": "srtf"}
    assert spec.swept == ["policy", "seed"]
    assert len({c.id for c in spec.cells}) == 7


def test_cell_ids_do_not_depend_on_spelling_or_order(tmp_path):
    a = load_spec(_spec(tmp_path, "grid: {policy: [sjf], max-jobs-per-gpu: 2}\n")).cells[0]
    b = load_spec(_spec(tmp_path, "base: {max_jobs_per_gpu: 2}\nruns: [{policy: sjf}]\n")).cells[0]
    assert a.id == b.id


@pytest.mark.parametrize(("text", "message"), [
    ("grid:\n  policy: [fifo]\n  polcy: [sjf]\n", "line 3: grid.polcy: unknown simulate option 'polcy' (did you mean 'policy'?)"),
    ("base:\n  nodes: many\ngrid: {policy: [fifo]}\n", "line 2: base.nodes: expected an integer, got 'many'"),
    ("grid:\n  seed: []\n", "line 2: grid.seed: the list of values is empty"),
    ("grid:\n  seed: [1, 1]\n", "line 2: grid.seed: a value appears twice in the list"),
    ("gird:\n  seed: [1]\n", "line 1: unknown key 'gird'"),
    ("base: {jobs: 10}\n", "nothing to run"),
    ("grid:\n  policy: [fifo\n", "not valid YAML"),
    ("runs: {policy: fifo}\n", "line 1: runs: expected a non-empty list"),
    ("grid: {backfill: [yes please]}\n", "grid.backfill: expected true or false"),
])
def test_spec_errors_name_the_line_and_key(tmp_path, text, message):
    with pytest.raises(SpecError) as err:
        load_spec(_spec(tmp_path, text))
    assert message in str(err.value)
    assert str(tmp_path / "spec.yaml") in str(err.value)


def test_unknown_policy_is_caught_before_running_and_points_at_its_line(tmp_path):
    spec = load_spec(_spec(tmp_path, "base: {nodes: 8}\ngrid:\n  seed: [0]\n  policy: [fifo, nosuch]\n"))
    with pytest.raises(SpecError) as err:
        validate(spec)
    assert "line 4: cell policy=nosuch: policy:" in str(err.value) and "nosuch" in str(err.value)


def test_missing_trace_file_is_caught_before_running(tmp_path):
    spec = load_spec(_spec(tmp_path, "base: {trace: nowhere.csv}\ngrid: {policy: [fifo]}\n"))
    with pytest.raises(SpecError, match="line 1: cell .*trace: --trace nowhere.csv: no such file"):
        validate(spec)


def test_cli_reports_a_bad_spec_in_one_line_with_exit_2(tmp_path):
    path = _spec(tmp_path, "grid:\n  policy: [fifo]\n  nodes: [8, 0.5]\n")
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out")])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "line 3: grid.nodes" in lines[0]
    assert not (tmp_path / "out").exists()


def test_baseline_option_is_validated():
    assert parse_baseline("policy=fifo,nodes=16") == {"policy": "fifo", "nodes": 16}
    with pytest.raises(ValueError, match="expected KEY=VALUE"):
        parse_baseline("fifo")
    with pytest.raises(ValueError, match="unknown simulate option 'polic'"):
        parse_baseline("polic=fifo")
    with pytest.raises(ValueError, match="nodes: expected an integer"):
        parse_baseline("nodes=big")


def test_a_baseline_on_an_option_no_cell_sets_is_refused_before_running(tmp_path):
    path = _spec(tmp_path, "grid: {policy: [fifo, sjf]}\n")
    res = runner.invoke(app, ["sweep", str(path), "--out", str(tmp_path / "out"), "--baseline", "nodes=8"])
    assert res.exit_code == 2
    assert "baseline: nodes is not an option the cells set (they set: policy)" in res.output
    assert not (tmp_path / "out").exists()
