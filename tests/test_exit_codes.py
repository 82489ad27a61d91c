"""Error exits end with 2 every time (issue 37): the interpreter's teardown with pyarrow loaded
ended ~3 in 100 with 134 ("terminate called without an active exception"); the entry point now
ends an error exit itself, flushed, without the teardown."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
RUNS = 100


def _paths(tmp: Path) -> dict[str, list[str]]:
    bad = tmp / "bad.csv"
    bad.write_text("job_id,vc,gpus,submit_time,duration\na,vc01,1,0,100\nb,vc01,x,5,100\n")
    ok = tmp / "ok.csv"
    ok.write_text("job_id,vc,gpus,submit_time,duration\na,vc01,1,0,100\nb,vc01,2,5,100\n")
    return {  # the first two load pyarrow (a trace read); the others are cheap, run 100 times each
        "bad trace row": ["simulate", "--trace", str(bad), "--out", str(tmp / "r")],
        "no job left": ["simulate", "--trace", str(ok), "--vcs", "nope", "--out", str(tmp / "r")],
        "bad option value": ["experiment", "eta", "--seed", "-1"],
        "parser error": ["simulate", "--no-such-option"],
        "missing file": ["cluster", "show", str(tmp / "none.toml")],
    }


CHEAP = ("bad option value", "parser error", "missing file")


def _forked_codes(argv: list[str], runs: int) -> list[int]:
    """Exit codes of ``runs`` forked copies of this process, each running the program's entry
    point on ``argv``: a copy that returns from it (or raises) instead of ending itself is 99."""
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    assert CliRunner().invoke(app, argv).exit_code == 2   # in this process: imports what the path needs once
    codes = []
    for _ in range(runs):
        pid = os.fork()
        if pid == 0:  # the child: the entry point must end the process itself
            try:
                null = os.open(os.devnull, os.O_WRONLY)
                os.dup2(null, 1)
                os.dup2(null, 2)
                sys.argv = ["dlsched", *argv]
                app()
            finally:
                os._exit(99)
        _, status = os.waitpid(pid, 0)
        codes.append(os.waitstatus_to_exitcode(status))
    return codes


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_every_error_exit_is_2_each_time(tmp_path) -> None:
    import pyarrow.csv

    pyarrow.csv.read_csv(_paths(tmp_path)["bad trace row"][2])   # pyarrow loaded and used, as a trace read does
    paths = _paths(tmp_path)
    start = time.perf_counter()
    for name in CHEAP:
        codes = _forked_codes(paths[name], RUNS)
        assert codes == [2] * RUNS, (name, sorted(set(codes)))
    for name in ("bad trace row", "no job left"):   # the costly ones, fewer times
        codes = _forked_codes(paths[name], RUNS // 10)
        assert codes == [2] * (RUNS // 10), (name, sorted(set(codes)))
    print(f"\n{len(CHEAP)} error paths x {RUNS} + 2 x {RUNS // 10} exits: all 2, {time.perf_counter() - start:.1f} s")


@pytest.mark.parametrize("name", ["bad trace row", "no job left"])
def test_the_installed_entry_point_exits_2_with_one_error_line(tmp_path, name) -> None:
    argv = _paths(tmp_path)[name]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    proc = subprocess.run([sys.executable, "-m", "dlsched.cli.main", *argv], capture_output=True, text=True,
                          check=False,
                          env=env, timeout=120)
    assert proc.returncode == 2 and proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert lines[-1].startswith("error: ") and sum(line.startswith("error: ") for line in lines) == 1, proc.stderr
