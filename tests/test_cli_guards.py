"""Issue 12's first-hour failures: each is one `error:` line naming the option or value, exit 2,
and impossible sizes or unusable outputs are refused before any work starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.checks import check_job_count, check_out_dir, check_out_file
from dlsched.cli.main import app

REPO = Path(__file__).resolve().parents[1]


def _run(*argv: str):
    result = CliRunner().invoke(app, list(argv))
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    return result.exit_code, lines


@pytest.mark.parametrize("argv", [
    ("simulate", "--jobs", "1000000000000"),
    ("estimate", "--jobs", "1000000000000"),
    ("trace", "generate", "{tmp}/big.csv", "--jobs", "100000000000"),
])
def test_impossible_sizes_are_refused_before_work(argv, tmp_path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    code, lines = _run(*argv, "--out", str(tmp_path / "run")) if argv[0] == "simulate" else _run(*argv)
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: --jobs ") and "of memory" in lines[0] and "use at most" in lines[0]
    assert not (tmp_path / "run").exists() and not (tmp_path / "big.csv").exists()


def test_job_count_estimate_numbers() -> None:
    # 300 MiB base + 2,200 bytes a job for a simulation; 80 % of what is available may be used
    check_job_count(1000, "simulate", available=10 * 2**30)
    with pytest.raises(ValueError, match=r"--jobs 5,000,000: would need about 10.5 GiB .* use at most 3,761,528 jobs"):
        check_job_count(5_000_000, "simulate", available=10 * 2**30)
    with pytest.raises(ValueError, match="--jobs must be >= 1, got 0"):
        check_job_count(0)


def test_existing_file_as_out_dir_is_refused_before_the_simulation(tmp_path) -> None:
    existing = tmp_path / "existing"
    existing.write_text("keep me\n")
    code, lines = _run("simulate", "--jobs", "50", "--out", str(existing))
    assert code == 2 and lines == [f"error: --out {existing}: exists and is not a directory"]
    assert existing.read_text() == "keep me\n"


def test_output_checks(tmp_path) -> None:
    blocker = tmp_path / "f"
    blocker.write_text("")
    check_out_dir(tmp_path / "new" / "deeper")          # creatable: fine
    check_out_file(tmp_path / "new" / "t.csv")
    with pytest.raises(ValueError, match="is a file, so no directory can be created under it"):
        check_out_file(blocker / "t.csv", "OUTPUT")
    with pytest.raises(ValueError, match="is a directory, not a file"):
        check_out_file(tmp_path, "--out")


def test_parser_errors_are_one_line_not_a_framework_box(tmp_path) -> None:
    code, lines = _run("predict", str(tmp_path / "m.onnx"), "--batch", "-1")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: ") and "'--batch'" in lines[0] and "-1 is not in the range x>=1" in lines[0]
    code, lines = _run("no-such-command")
    assert code == 2 and lines == ["error: dlsched: No such command 'no-such-command'. (see 'dlsched --help')"]


def test_version() -> None:
    from dlsched import __version__

    code, lines = _run("--version")
    assert code == 0 and lines == [f"dlsched {__version__}"]


def _without_onnx(*argv: str) -> subprocess.CompletedProcess:
    """Run dlsched in a fresh interpreter where `import onnx` fails, as on a `make demo` install."""
    code = ("import sys; sys.modules['onnx'] = None; sys.argv = ['dlsched', *sys.argv[1:]]; "
            "from dlsched.cli.main import app; app()")
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"}
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, timeout=300)


def test_missing_graph_extra_names_the_extra(tmp_path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"\x08\x07")
    done = _without_onnx("predict", str(model))
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines() == [
        "error: this command needs the optional 'graph' extra (onnx is not installed): "
        "pip install -e '.[graph]' (or: pip install 'dlsched[graph]')"]


def test_predict_resources_without_onnx_is_an_error_not_a_silent_zero(tmp_path) -> None:
    done = _without_onnx("simulate", "--jobs", "50", "--predict-resources", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert done.stderr.strip().splitlines()[-1].startswith(
        "error: --predict-resources needs the optional 'graph' extra (onnx is not installed)")
    assert not (tmp_path / "r" / "jobs.csv").exists()


def test_predict_takes_a_zoo_name_and_refuses_an_unknown_one() -> None:
    pytest.importorskip("onnx")
    code, lines = _run("predict", "no_such_model")
    assert code == 2 and len(lines) == 1
    assert lines[0].startswith("error: no_such_model: no such file, and not a zoo model name (zoo: a3c_pong, ")
