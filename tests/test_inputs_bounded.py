"""Numbers and outputs checked before the work, notes for what a run ignores (issue 37, point 2)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.checks import MAX_SEED, check_out_file
from dlsched.cli.main import app


def _run(*argv) -> tuple[int, str, float]:
    start = time.perf_counter()
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, result.output, time.perf_counter() - start


def test_an_output_file_in_a_missing_folder_is_written_after_the_work(tmp_path) -> None:
    # `experiment preemption --markdown no-such-dir/x.md` failed after 14 s of simulation
    target = tmp_path / "no-such-dir" / "deeper" / "x.md"
    check_out_file(target, "--markdown")
    assert target.parent.is_dir() and not target.exists()
    code, out, _ = _run("experiment", "preemption", "--seeds", "1", "--jobs", "60", "--markdown", target)
    assert code == 0, out
    assert target.read_text().startswith("|") and "srtf-pred" in target.read_text()


@pytest.mark.parametrize("argv,message", [
    (("experiment", "preemption", "--seeds", "1", "--jobs", "60", "--markdown", "{tmp}"),
     "error: --markdown {tmp}: is a directory, not a file"),
    (("experiment", "preemption", "--seeds", "1", "--jobs", "60", "--markdown", "{file}/x.md"),
     "error: --markdown {file}/x.md: {file} is a file, so no directory can be created under it"),
    (("reproduce", "helios-qssf-builtin", "--html", "{tmp}"), "error: --html {tmp}: is a directory, not a file"),
    (("reproduce", "helios-qssf-builtin", "--out", "{file}"), "error: --out {file}: exists and is not a directory"),
    (("experiment", "eta", "--seed", "-1"), f"error: --seed -1: want a whole number from 0 to {MAX_SEED:,}"),
    (("experiment", "eta", "--seed", str(MAX_SEED + 1)),
     f"error: --seed {MAX_SEED + 1}: want a whole number from 0 to {MAX_SEED:,}"),
    (("experiment", "eta", "--overrun", "inf"), "error: --overrun must be a finite number >= 0, got inf"),
    (("sweep", "{repo}/docs/examples/sweep-policies.yaml", "--out", "{file}"),
     "error: --out {file}: exists and is not a directory"),
])
def test_bad_inputs_fail_before_the_work(tmp_path, argv, message) -> None:
    file = tmp_path / "a-file"
    file.write_text("x")
    fill = {"tmp": str(tmp_path), "file": str(file), "repo": str(Path(__file__).resolve().parent.parent)}
    code, out, seconds = _run(*(a.format(**fill) for a in argv))
    assert code == 2 and out.strip() == message.format(**fill), out
    assert seconds < 5.0   # before any simulation


def test_compare_notes_a_parameter_some_policies_ignore(tmp_path) -> None:
    code, out, _ = _run("compare", "--jobs", "30", "--policies", "fifo,las,sjf", "--param", "threshold=600",
                        "--out", tmp_path / "c")
    assert code == 0, out
    assert "note: --param threshold is read only by las here; fifo, sjf ignore it" in out
    code, out, _ = _run("compare", "--jobs", "30", "--policies", "las,fairshare", "--threshold", "600",
                        "--half-life", "60", "--out", tmp_path / "d")
    assert code == 0, out
    assert "note: --half-life is read only by fairshare here; las ignores it" in out
    assert "note: --threshold is read only by las here; fairshare ignores it" in out
