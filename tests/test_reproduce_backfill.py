"""`dlsched reproduce backfill` / `backfill-philly`: a tiny case through the experiment's code,
every variant in its table, the paper's findings beside ours, and clean errors without the data."""

from __future__ import annotations

import copy
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.experiments.dlsched.backfill import VARIANTS
from dlsched.reproduce.backfill import FINDINGS
from dlsched.reproduce.registry import REPRODUCTIONS
from dlsched.reproduce.render import run_reproduction

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[1]


def test_tiny_builtin_case_has_every_variant_and_the_papers_findings(tmp_path):
    repro = copy.copy(REPRODUCTIONS["backfill"]).configured(seeds=2)
    repro.jobs, repro.nodes = 150, 4   # a queue that backs up: the variants differ
    result = run_reproduction(repro, tmp_path / "no-shared-needed")
    findings, means, pairs = result.tables
    assert [row[0] for row in means.rows] == [v.label for v in VARIANTS]
    assert "2 seeds" in means.title and "150 jobs" in means.title
    by = {row[0]: row for row in means.rows}
    # reservations: FIFO without backfill waits longest; the truth breaks no reservation
    assert by["fifo"][3] > max(row[3] for label, row in by.items() if label != "fifo")
    assert by["easy-truth"][7] == 0 and by["conservative-truth"][7] == 0
    assert [row[0] for row in findings.rows] == [f"{a} - {b}" for a, b, _, _ in FINDINGS]
    # Δ of the findings table = the difference of the per-variant means
    bsld = {row[0]: row[4] for row in means.rows}
    for row, (a, b, _, _) in zip(findings.rows, FINDINGS):
        assert row[2] == pytest.approx(bsld[a] - bsld[b], abs=0.02)
        assert re.fullmatch(r"[-+][\d.]+ \.\. [-+][\d.]+", row[3])
        assert row[4].split()[0] in {"lower", "higher", "tied"}
    assert len(pairs.rows) == 10
    assert any("Tsafrir" in result.paper for _ in [0]) and "EASY++" in result.paper


def test_backfill_is_listed_and_runs_with_seeds_from_the_cli():
    res = runner.invoke(app, ["reproduce", "--list", "--json"])
    names = [r["name"] for r in __import__("json").loads(res.output)]
    assert "backfill" in names and "backfill-philly" in names
    assert REPRODUCTIONS["backfill-philly"].needs == (
        "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz",)


def test_philly_entry_without_the_shared_data_is_one_error_line(tmp_path):
    res = runner.invoke(app, ["reproduce", "backfill-philly", "--shared", str(tmp_path), "--seeds", "1"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1
    assert lines[0].startswith(f"error: reproduce backfill-philly needs {tmp_path}/traces/philly/reference_run/"
                               "input_cluster_log_helios_format.csv.gz (not found")


def test_experiment_philly_option_missing_file_is_one_error_line(tmp_path):
    res = runner.invoke(app, ["experiment", "backfill", "--philly", str(tmp_path / "none.csv.gz"), "--seeds", "1"])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert lines == [f"error: --philly {tmp_path / 'none.csv.gz'}: no such file"]


def test_docs_table_lists_both_entries():
    text = (ROOT / "docs" / "reproduce.md").read_text()
    for name in ("backfill", "backfill-philly"):
        assert f"| `{name}` |" in text


def test_philly_slice_pairs_limits_per_seed(shared):
    """The first 300 Philly jobs: the same jobs every seed, limits drawn per seed (fresh copies)."""
    from dlsched.experiments.dlsched.backfill_philly import philly_source

    source, info = philly_source(shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz",
                                 300, 8, "overestimate=1:5,round=900")
    assert info == {"window_jobs": 68503, "jobs": 300, "too_wide": 0}
    a, b, a2 = source(0), source(1), source(0)
    assert [j.job_id for j in a.jobs] == [j.job_id for j in b.jobs]
    assert [j.time_limit_s for j in a.jobs] == [j.time_limit_s for j in a2.jobs]
    assert [j.time_limit_s for j in a.jobs] != [j.time_limit_s for j in b.jobs]
    assert all(j.time_limit_s % 900 == 0 and j.vc == "all" for j in a.jobs)


def test_a_philly_table_is_updated_variant_by_variant(shared, tmp_path):
    """``--philly --update``: the kept file names its workload, a rerun variant replaces only its rows,
    and a built-in results file is refused (the workloads differ)."""
    import json

    trace = shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
    small = ["experiment", "backfill", "--philly", str(trace), "--seeds", "1", "--jobs", "120", "--nodes", "4"]
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    res = runner.invoke(app, [*small, "--variants", "fifo,easy-limit", "--results", str(whole)])
    assert res.exit_code == 0, res.output
    kept = json.loads(whole.read_text())
    assert kept["workload"].startswith("Philly reference window") and list(kept["results"]) == ["fifo", "easy-limit"]
    part.write_text(json.dumps({**kept, "results": {"fifo": kept["results"]["fifo"]}}))
    res = runner.invoke(app, [*small, "--variants", "easy-limit", "--update", "--results", str(part)])
    assert res.exit_code == 0, res.output
    assert "note: --update kept 1 variants" in res.output and "Philly reference window" in res.output
    assert json.loads(part.read_text()) == kept
    builtin = tmp_path / "builtin.json"
    builtin.write_text(json.dumps({k: v for k, v in kept.items() if k != "workload"}))
    res = runner.invoke(app, [*small, "--variants", "easy-limit", "--update", "--results", str(builtin)])
    assert res.exit_code == 2 and "the kept results have workload='Built-in workload'" in res.output
