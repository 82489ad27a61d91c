"""``dlsched experiment eta``: bad input is one ``error:`` line (exit 2); a small run prints the
accuracy table with both methods and every job-size group; the Philly window when ../shared is there."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app


def _run(*argv: str):
    result = CliRunner().invoke(app, ["experiment", "eta", *argv])
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    return result.exit_code, lines, result.output


@pytest.mark.parametrize(("argv", "starts"), [
    (("--samples", "0"), "error: --samples must be between 1 and 2000, got 0"),
    (("--samples", "99999"), "error: --samples must be between 1 and 2000"),
    (("--jobs", "0"), "error: --jobs must be between 1 and 200000, got 0"),
    (("--jobs", "10000000"), "error: --jobs must be between 1 and 200000"),
    (("--policies", "horus"), "error: --policies horus: the ETA experiment runs fifo, qssf"),
    (("--policies", ","), "error: --policies: give at least one policy"),
    (("--overrun", "-1"), "error: --overrun must be a finite number >= 0, got -1.0"),
    (("--trace", "nope.csv"), "error: --trace nope.csv: give --vc-config FILE"),
    (("--trace", "nope.csv", "--vc-config", "nope2.csv"), "error: --trace nope.csv: no such file"),
    (("--vc-config", "v.csv"), "error: --vc-config, --start and --end go with --trace"),
    (("--trace", "{bad}", "--vc-config", "{bad}"), "error: {bad}: no VCs in file"),
])
def test_bad_input_is_one_error_line(argv, starts, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n")
    argv = [a.replace("{bad}", str(bad)) for a in argv]
    starts = starts.replace("{bad}", str(bad))
    code, lines, _ = _run(*argv)
    assert code == 2 and len(lines) == 1, lines
    assert lines[0].startswith(starts), lines[0]


def test_small_builtin_run_reports_both_methods_by_group():
    code, _, output = _run("--jobs", "600", "--samples", "15", "--json")
    assert code == 0, output
    results = json.loads(output)
    assert [r["policy"] for r in results] == ["fifo", "qssf"]
    for r in results:
        methods = {row["method"] for row in r["rows"]}
        assert methods == {"forward simulation", "naive (position x mean / running)",
                           "forward simulation, true durations (diagnostic)"}
        groups = {row["group"] for row in r["rows"]}
        assert "all" in groups and groups <= {"all", "1 GPU", "2-8 GPUs", ">8 GPUs"}
        assert 0 < r["refreshes"] <= 15
        for row in r["rows"]:
            assert 0.0 <= row["within_10pct"] <= 1.0 and 0.0 <= row["within_1h"] <= 1.0
            assert row["median_abs_error_h"] >= 0.0
        total = {row["method"]: row["estimates"] for row in r["rows"] if row["group"] == "all"}
        assert len(set(total.values())) == 1  # every method judged on the same estimates


def test_philly_window_slice(shared):
    base = shared / "traces/philly"
    code, _, output = _run("--trace", str(base / "reference_run/input_cluster_log_helios_format.csv.gz"),
                           "--vc-config", str(base / "philly_vc_config.csv"), "--start", "2017-10-01 00:00:00",
                           "--end", "2017-10-04 00:00:00", "--samples", "5", "--policies", "fifo", "--json")
    assert code == 0, output
    (r,) = json.loads(output)
    assert r["jobs"] > 1000 and r["refreshes"] >= 1
    assert any(row["group"] == "all" and row["estimates"] > 0 for row in r["rows"])


def test_markdown_output_is_the_docs_table():
    code, _, output = _run("--jobs", "400", "--samples", "8", "--policies", "fifo", "--markdown")
    assert code == 0, output
    lines = [ln for ln in output.splitlines() if ln.startswith("|")]
    assert lines[0].startswith("| method | group | jobs | estimates | median wait (h)")
    assert any(ln.startswith("| forward simulation | all |") for ln in lines)
    assert any(ln.startswith("| naive (position x mean / running) | all |") for ln in lines)
