"""Issue 25's run-option cases: each is one `error:` line naming the option (exit 2) or a `note:`."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _run(*argv: object) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


@pytest.mark.parametrize("argv,message", [
    (["--preemption-overhead", "-100000"], ("error: --preemption-overhead must be a finite number >= 0 seconds, "
                                            "got -100000.0")),
    (["--preemption-overhead", "1e12"], "error: --preemption-overhead must be at most 86,400 seconds"),
    (["--boot-delay", "-5"], "error: --boot-delay must be a finite number >= 0 seconds, got -5.0"),
    (["--idle-timeout", "-1"], "error: --idle-timeout must be a finite number >= 0 seconds, got -1.0"),
    (["--seed", "-1"], "error: --seed must be >= 0, got -1"),
    (["--max-jobs-per-gpu", "1000000000"], ("error: --max-jobs-per-gpu must be at most 64 (jobs one GPU may hold), "
                                            "got 1,000,000,000")),
    (["--out", ""], "error: --out is empty: name the run directory"),
    (["--policy", "las", "--param", "queues=0"], "error: --param queues must be >= 1, got 0"),
    (["--policy", "las", "--param", "nope=1"], "error: --param nope: not a parameter of las"),
])
def test_bad_values_are_one_error_line_naming_the_option(argv, message, tmp_path):
    args = ["simulate", "--jobs", "50", *argv]
    if "--out" not in argv:
        args += ["--out", tmp_path]
    code, lines = _run(*args)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(message), lines


def test_compare_refuses_a_policy_listed_twice(tmp_path):
    code, lines = _run("compare", "--jobs", "50", "--policies", "fifo,fifo", "--out", tmp_path)
    assert code == 2 and lines == [("error: --policies fifo,fifo: fifo listed twice (each policy runs once into "
                                    "DIR/<policy>/)")]


def test_ignored_options_and_free_sharing_get_notes(tmp_path):
    code, lines = _run("simulate", "--trace", FIXTURES / "helios_log.csv", "--vc-config", FIXTURES / "vc_config.csv",
                       "--jobs", "10", "--seed", "3", "--gpu", "A100", "--out", tmp_path)
    notes = [ln for ln in lines if ln.startswith("note: ")]
    assert code == 0
    assert "note: --jobs sizes and seeds the built-in workload; with --trace it does nothing" in notes
    assert "note: --seed sizes and seeds the built-in workload; with --trace it does nothing" in notes
    assert any(n.startswith("note: --gpu is read only with --predict-resources") for n in notes)
    code, lines = _run("simulate", "--jobs", "50", "--max-jobs-per-gpu", "2", "--out", tmp_path)
    assert code == 0 and "note: --max-jobs-per-gpu 2 without --speed-model: co-located jobs run at full speed, as " \
                         "if sharing were free (give --speed-model time-sliced or colocation for slowdowns)" in lines
    code, lines = _run("simulate", "--jobs", "50", "--max-jobs-per-gpu", "2", "--speed-model", "time-sliced",
                       "--out", tmp_path)
    assert code == 0 and not [ln for ln in lines if "full speed" in ln]


def test_zero_duration_jobs_are_counted(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,vc,gpus,submit_time,duration\nj0,v,1,0,0\nj1,v,1,5,0\nj2,v,1,9,30\n")
    code, lines = _run("simulate", "--trace", trace, "--nodes", "1", "--out", tmp_path / "r")
    assert code == 0
    assert "note: 2 of 3 jobs have a duration of 0 s: they finish as they start (JCT = queue delay) and count in " \
           "every average" in lines


def test_sweep_grid_size_is_bounded_before_any_work(tmp_path):
    values = ", ".join(str(i) for i in range(1000))
    spec = tmp_path / "s.yaml"
    spec.write_text(f"grid:\n  seed: [{values}]\n  jobs: [{values}]\n  nodes: [{values}]\n  gpus_per_node: [{values}]\n")
    code, lines = _run("sweep", spec, "--out", tmp_path / "sw")
    assert code == 2 and len(lines) == 1
    assert "expands to 1,000,000,000,000 cells" in lines[0] and "limit of 100,000 cells" in lines[0]


def test_sweep_out_must_not_be_empty(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("grid: {seed: [0]}\n")
    code, lines = _run("sweep", spec, "--out", "")
    assert code == 2 and lines == ["error: --out is empty: name the sweep directory (e.g. --out runs/sweep)"]


def test_sweep_scheduler_without_dask_names_the_extra(tmp_path, monkeypatch):
    spec = tmp_path / "s.yaml"
    spec.write_text("base: {jobs: 50}\ngrid: {seed: [0]}\n")
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda n, *a: None if n == "distributed" else real(n, *a))
    code, lines = _run("sweep", spec, "--out", tmp_path / "sw", "--scheduler", "tcp://127.0.0.1:1")
    assert code == 2 and lines == [("error: --scheduler tcp://127.0.0.1:1: running on a Dask cluster needs the "
                                    "'sweep' extra (dask.distributed is not installed): pip install 'dlsched[sweep]'")]


@pytest.mark.parametrize("command", ["compare", "demo"])
def test_empty_out_is_refused_by_every_run_command(command):
    code, lines = _run(command, "--jobs", "50", "--out", "")
    assert code == 2 and lines == ["error: --out is empty: name the run directory (e.g. --out runs/mine)"]
