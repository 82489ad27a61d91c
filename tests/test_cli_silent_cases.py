"""Issue 12's silent cases: each is now an error or a printed note, and what is filtered is counted.

Small built-in workloads (a few hundred jobs) keep every case under a second.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.traces import synthetic

FIXTURES = Path(__file__).parent / "fixtures" / "traces"


def _run(*argv: str) -> tuple[int, list[str]]:
    result = CliRunner().invoke(app, [str(a) for a in argv])
    assert "Traceback" not in result.output
    return result.exit_code, [ln for ln in result.output.splitlines() if ln.strip()]


def test_builtin_window_start_after_end_is_an_error(tmp_path) -> None:
    code, lines = _run("simulate", "--jobs", "300", "--start", "100000", "--end", "50000", "--out", tmp_path)
    assert code == 2 and lines == ["error: --start 100000 is after --end 50000: the window holds no time"]


def test_builtin_window_and_vcs_filter_and_count(tmp_path) -> None:
    jobs = synthetic.generate(jobs=300, seed=0).jobs
    mine = sorted(j.submit_time for j in jobs if j.vc in ("vc01", "vc02"))
    end = mine[len(mine) // 2]  # half of the two VCs' jobs are submitted after it
    kept = [t for t in mine if t <= end]
    other_vc = len(jobs) - len(mine)
    late = len(mine) - len(kept)
    assert late > 0 and other_vc > 0
    code, lines = _run("simulate", "--jobs", "300", "--end", str(end), "--vcs", "vc01,vc02", "--out", tmp_path)
    assert code == 0
    assert f"left out {other_vc} rows: VC not in --vcs" in lines
    assert f"left out {late} rows: outside window (after end)" in lines
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert summary["jobs"] == len(kept)
    assert summary["filtered"] == {"VC not in --vcs": other_vc, "outside window (after end)": late}
    sizes = synthetic.default_cluster(synthetic.generate(jobs=300, seed=0))
    # cluster-wide figures are over the two simulated VCs only
    assert summary["cluster"] == {"vcs": ["vc01", "vc02"], "nodes": sizes["vc01"] + sizes["vc02"],
                                  "gpus": 8 * (sizes["vc01"] + sizes["vc02"])}
    assert set(summary["per_vc"]) == {"vc01", "vc02"}


def test_unknown_vc_in_vcs_is_an_error(tmp_path) -> None:
    code, lines = _run("simulate", "--jobs", "300", "--vcs", "ghost,vc01", "--out", tmp_path)
    assert code == 2 and lines[-1].startswith("error: --vcs ghost: not in the built-in cluster (it has vc01, ")
    vc_config = FIXTURES / "vc_config.csv"
    code, lines = _run("simulate", "--trace", FIXTURES / "helios_log.csv", "--vc-config", vc_config,
                       "--vcs", "ghost,6214e9", "--out", tmp_path)
    assert code == 2 and lines[-1] == f"error: --vcs ghost: not in the VC config {vc_config} (it has 6214e9, 103959, 0e4a51)"


def test_vc_config_vc_without_jobs_is_a_note(tmp_path) -> None:
    config = tmp_path / "vcs.csv"
    config.write_text("vc,node num\n6214e9,4\nidle_vc,3\n")
    code, lines = _run("simulate", "--trace", FIXTURES / "helios_log.csv", "--vc-config", config,
                       "--out", tmp_path / "run")
    assert code == 0
    assert ("note: VCs with no jobs to simulate: idle_vc (3 nodes); their nodes stay in the cluster and count "
            "in gpu_utilization (drop them with --vcs)") in lines


def test_options_that_do_nothing_get_a_note(tmp_path) -> None:
    code, lines = _run("simulate", "--jobs", "100", "--lam", "0.3", "--boot-delay", "10", "--topology", "dgx1",
                       "--out", tmp_path)
    assert code == 0
    notes = [ln for ln in lines if ln.startswith("note: ")]
    assert notes == [
        "note: --lam is read only by qssf, easy, conservative; fifo ignores it",
        "note: --boot-delay does nothing without --energy ces|vanilla",
        "note: --topology sets the node topology for the speed model only: placement consolidate does not "
        "read it (topo-aware, topo-aware-p, socket-best-fit do)"]
    code, lines = _run("simulate", "--jobs", "100", "--energy", "ces", "--idle-timeout", "60", "--out", tmp_path)
    assert code == 0 and "note: --idle-timeout is read only by --energy vanilla, not ces" in lines
    code, lines = _run("simulate", "--jobs", "100", "--policy", "qssf", "--lam", "0.3", "--out", tmp_path)
    assert code == 0 and not [ln for ln in lines if ln.startswith("note: --lam")]


def test_header_only_trace_says_so(tmp_path) -> None:
    trace = tmp_path / "t.csv"
    trace.write_text((FIXTURES / "helios_log.csv").read_text().splitlines()[0] + "\n")
    code, lines = _run("simulate", "--trace", trace, "--nodes", "2", "--out", tmp_path / "run")
    assert code == 2 and lines[-1] == f"error: {trace}: the trace holds no job rows (only a header?)"


def test_filters_that_leave_nothing_say_which(tmp_path) -> None:
    code, lines = _run("simulate", "--trace", FIXTURES / "helios_log.csv", "--nodes", "2",
                       "--start", "2030-01-01", "--out", tmp_path)
    assert code == 2 and "no jobs left to simulate: all" in lines[-1] and "outside window (before start)" in lines[-1]


@pytest.mark.parametrize("content,reason", [
    (b"", "the file is empty"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe", "not a text (CSV) file"),
    (b"# a comment\n# another\n", "the file holds only '#' comment lines, no CSV header"),
])
def test_empty_binary_and_comment_only_files(tmp_path, content, reason) -> None:
    trace = tmp_path / "t.csv"
    trace.write_bytes(content)
    code, lines = _run("trace", "stats", trace)
    assert code == 2 and len(lines) == 1 and lines[0].startswith(f"error: {trace}: {reason}")


def test_trace_window_start_after_end(tmp_path) -> None:
    code, lines = _run("trace", "convert", FIXTURES / "helios_log.csv", tmp_path / "o.csv",
                       "--start", "2017-11-01", "--end", "2017-10-01")
    assert code == 2 and lines[-1].endswith("start=2017-11-01 is after end=2017-10-01: the window holds no time")
    assert not (tmp_path / "o.csv").exists()


def test_nodes_zero_and_unknown_presets(tmp_path) -> None:
    code, lines = _run("simulate", "--jobs", "50", "--nodes", "0", "--out", tmp_path)
    assert code == 2 and lines == ["error: --nodes must be >= 1, got 0"]
    code, lines = _run("simulate", "--jobs", "50", "--topology", "foo", "--out", tmp_path)
    assert code == 2 and lines == ["error: unknown topology preset 'foo'; choose from dgx1, minsky, nvswitch, pcie"]
    code, lines = _run("simulate", "--jobs", "50", "--compat", "foo", "--out", tmp_path)
    assert code == 2 and lines == ["error: unknown compat mode 'foo'; choose from none, helios"]
