"""The sharing experiments: metrics by hand, one run's invariants, and the CLI commands at small scale."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.core.job import Job
from dlsched.experiments.sharing.run import PolicyRun, gain, job_metrics, run
from dlsched.experiments.sharing.tables import colocation_oracle

runner = CliRunner()


def _done(jid: str, submit: float, start: float, end: float, solo: float) -> Job:
    j = Job(jid, "v", 1, submit, solo)
    j.start_time, j.end_time, j.queue_delay = start, end, start - submit
    return j


def test_job_metrics_by_hand():
    """a: submitted 0, ran 0-100 (solo 100: speed 1); b: submitted 10, waited 40, ran 50-150
    (solo 50: speed 0.5). Makespan 150; JCT (100 + 140) / 2; run time (100 + 100) / 2."""
    m = job_metrics([_done("a", 0, 0, 100, 100), _done("b", 10, 50, 150, 50)])
    assert m["makespan"] == 150 and m["avg_jct"] == 120 and m["avg_run_time"] == 100
    assert m["avg_wait"] == 20 and m["median_wait"] == 20 and m["std_wait"] == 20
    assert m["speed"] == pytest.approx(0.75)
    assert gain(200.0, 150.0) == 0.25


def test_no_sharing_runs_at_full_speed_and_the_oracle_never_runs_out_of_memory():
    fifo = run("coscheml-60", PolicyRun("FIFO", "fifo", 1), seed=0, predictions="perfect").metrics
    assert fifo["speed"] == pytest.approx(1.0) and fifo["failures"] == 0
    assert fifo["delivered_gpu_utilization"] <= fifo["busy_gpu_utilization"] <= 1
    oracle = run("coscheml-60", PolicyRun("oracle", "oracle-pairing", 2), seed=0, predictions="perfect").metrics
    assert oracle["failures"] == 0 and oracle["speed"] < 1.0  # it shares, so someone slows down


def test_oracle_comparison_shares_are_relative_to_the_oracle():
    res = colocation_oracle([0], "coscheml-60")
    rows = {(r["predictions"], r["policy"]): r for r in res["rows"]}
    for p in ("real", "perfect"):
        assert rows[(p, "no sharing (FIFO)")]["gain"] is None  # the baseline has no gain over itself
        if rows[(p, "oracle")]["share_of_oracle_gain"] is not None:
            assert rows[(p, "oracle")]["share_of_oracle_gain"] == pytest.approx(1.0)
    assert json.dumps(res, default=float)


def test_horus_table6_cli_json_and_result_file(tmp_path):
    res = runner.invoke(app, ["experiment", "horus-table6", "--seeds", "1", "--json", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    data = json.loads((tmp_path / "sharing_experiment.json").read_text())
    assert [(r["workload"], r["policy"]) for r in data["rows"]] == [
        (w, p) for w in ("horus-wlarge", "horus-wsmall") for p in ("FIFO", "PAB", "OBP", "Horus")]
    fifo = data["rows"][0]
    assert fifo["gain"] is None and fifo["paper_makespan_min"] == 306.9 and fifo["failures"] == 0
    horus = data["rows"][3]
    assert horus["paper_gain"] == 0.307 and horus["makespan_min"] > 0
    assert horus["gain"] == pytest.approx(1 - horus["makespan_min"] / fifo["makespan_min"])


def test_horus_table7_runs_without_shared_on_a_builtin_workload():
    res = runner.invoke(app, ["experiment", "horus-table7", "--workload", "horus-wsmall", "--nodes", "1",
                              "--k", "3,5", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout[res.stdout.index("{"):])
    assert [r["policy"] for r in data["rows"]] == ["FIFO", "OBP", "Horus", "Horus-f", "Horus k=5"]
    assert data["rows"][0]["reduction"] is None


@pytest.mark.parametrize("args, message", [
    (["horus-table6", "--seeds", "0"], "--seeds must be between 1 and 1,000"),
    (["horus-table6", "--seeds", "100000000"], "--seeds must be between 1 and 1,000"),
    (["coscheml", "--interval", "20"], "--interval must be 15, 30 or 60"),
    (["horus-table7", "--k", "a,b"], "--k must be comma-separated integers"),
    (["colocation-oracle", "--max-jobs-per-gpu", "1"], "--max-jobs-per-gpu must be >= 2"),
    (["colocation-oracle", "--workload", "nope"], "unknown workload 'nope'"),
    (["horus-table6", "--predictions", "psychic"], "unknown predictions 'psychic'"),
    (["horus-table6", "--policies", "horus:k"], "--policies: option 'k' of 'horus' is not key=value"),
])
def test_bad_options_give_one_error_line(args, message):
    res = runner.invoke(app, ["experiment", *args])
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and message in lines[0], res.output


def test_report_renders_a_sharing_experiment(tmp_path):
    from dlsched.report import build_report

    result = {"experiment": "coscheml", "seeds": [0, 1], "seconds": 3.0, "interval": 30,
              "rows": [{"policy": "Co-scheML", "avg_jct_s": 900.0, "paper_jct_s": 844.09, "delivered_util": 0.5,
                        "paper_util": None}]}
    (tmp_path / "sharing_experiment.json").write_text(json.dumps(result))
    page = build_report(tmp_path).read_text()
    # a header may wrap after its underscores (<wbr>): the column is still named whole
    assert "Co-scheML Fig. 7-9" in page and "844" in page and "50.0 %" in page
    assert "paper_jct_s" in page.replace("<wbr>", "")


@pytest.mark.parametrize("spec, message", [
    ("horus:k=abc", "error: --policies horus:k=abc: k expects an integer, got 'abc'"),
    ("horus:beta=0", "error: --policies horus:beta=0: beta must be >= 1 jobs per round, got 0"),
    ("horus:zz=1", "error: --policies horus:zz=1: horus takes no option 'zz'"),
])
def test_a_bad_policy_option_names_what_was_typed(spec, message):
    from typer.testing import CliRunner

    from dlsched.cli.main import app

    res = CliRunner().invoke(app, ["experiment", "compare", "--policies", spec, "--seeds", "1"])
    assert res.exit_code == 2 and res.output.strip().splitlines()[-1] == message
