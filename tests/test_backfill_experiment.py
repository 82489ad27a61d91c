"""The backfill experiment's numbers on hand-checked inputs, and its command's bad-input errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.experiments.dlsched.backfill import METRICS, markdown, means, merge_results, pairs, run_metrics


def test_run_metrics_hand_numbers(tmp_path):
    (tmp_path / "jobs.csv").write_text(
        "job_id,gpus,queue_delay,jct\n"
        "a,1,0,5\n"        # run 5 s < 10 s floor: (0 + 5) / 10 = 0.5 -> bounded at 1
        "b,8,90,120\n"     # run 30 s: (90 + 30) / 30 = 4; a large job waiting 90 s
        "c,16,300,400\n")  # run 100 s: 400 / 100 = 4; a large job waiting 300 s
    summary = {"avg_jct": 175.0, "p95_jct": 390.0, "avg_queue_delay": 130.0, "gpu_utilization": 0.5,
               "reservations": {"broken": 2}}
    got = run_metrics(tmp_path, summary)
    assert got == {"avg_jct": 175.0, "p95_jct": 390.0, "avg_queue_delay": 130.0, "bsld": 3.0,
                   "max_wait_large": 300.0, "utilization": 0.5, "broken": 2.0}
    got = run_metrics(tmp_path, {k: v for k, v in summary.items() if k != "reservations"})
    assert got["broken"] == 0.0   # a policy without reservations breaks none


def _runs(jct: list[float]) -> list[dict[str, float]]:
    return [{k: (v if k in ("avg_jct", "p95_jct") else 1.0) for k, _, _ in METRICS} for v in jct]


def test_pairs_are_per_seed_differences_with_a_corrected_ci():
    results = {"fifo": _runs([100.0, 200.0, 300.0]), "fifo+greedy": _runs([90.0, 190.0, 310.0])}
    [row] = pairs(results)   # only the compared pair present: fifo+greedy - fifo
    d = row["avg_jct"]
    assert (row["a"], row["b"], d["n"]) == ("fifo+greedy", "fifo", 3)
    assert d["diff"] == pytest.approx(-10 / 3)   # diffs -10, -10, +10
    # 4 metrics corrected together: level 1 - 0.05/4 = 0.9875; t(0.99375, 2) = 8.860; sd 11.547
    assert d["high"] - d["diff"] == pytest.approx(8.860 * 11.547005 / 3 ** 0.5, rel=1e-3)
    assert means(results)[0]["avg_jct"] == 200.0
    text = markdown(results, 100, "overestimate=2", 4)
    assert "| fifo+greedy - fifo | -3 [" in text and "| fifo | 200 | 200 |" in text
    assert "Bonferroni-corrected over the 4 differences shown" in text and "pool of 4 8-GPU nodes" in text


@pytest.mark.parametrize("args, message", [
    (["--seeds", "0"], "--seeds must be between 1 and 1,000"),
    (["--jobs", "0"], "--jobs must be >= 1, got 0"),
    (["--nodes", "0"], "--nodes must be >= 1, got 0"),
    (["--time-limits", "round=0"], "--time-limits: round must be > 0 seconds"),
    (["--markdown", "{tmp}/a-file/x.md"], "--markdown"),
])
def test_bad_input_is_one_error_line(args, message, tmp_path):
    (tmp_path / "a-file").write_text("")   # a folder that cannot be made: a file has its name
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = CliRunner().invoke(app, ["experiment", "backfill", *args])
    assert res.exit_code == 2 and "error: " in res.output and message in res.output, res.output
    assert "Traceback" not in res.output


def test_the_command_runs_every_variant_on_a_small_case(tmp_path):
    res = CliRunner().invoke(app, ["experiment", "backfill", "--seeds", "2", "--jobs", "120", "--nodes", "4",
                                   "--results", str(tmp_path / "r.json")])
    assert res.exit_code == 0, res.output
    assert "| conservative-truth - easy-truth |" in res.output and "| easy-pred+corr |" in res.output
    import json

    data = json.loads((tmp_path / "r.json").read_text())
    assert (data["seeds"], data["jobs"], data["nodes"]) == (2, 120, 4) and len(data["results"]) == 10
    assert all(len(runs) == 2 for runs in data["results"].values())


@pytest.mark.parametrize("args, message", [
    (["--variants", "fifo,easy-magic"], "--variants: unknown variant easy-magic (known: fifo, fifo+greedy,"),
    (["--variants", ","], "--variants: unknown variant ','"),
    (["--update"], "--update needs --results FILE"),
    (["--update", "--results", "{tmp}/none.json"], "--update: cannot read"),
    (["--update", "--results", "{tmp}/list.json"], "has no 'results' object"),
])
def test_bad_variants_or_update_is_one_error_line(args, message, tmp_path):
    (tmp_path / "list.json").write_text("[]")
    args = [a.replace("{tmp}", str(tmp_path)) for a in args]
    res = CliRunner().invoke(app, ["experiment", "backfill", "--seeds", "1", "--jobs", "10", *args])
    assert res.exit_code == 2 and "error: " in res.output and message in res.output, res.output
    assert "Traceback" not in res.output


def test_merge_replaces_only_the_rerun_variants_in_table_order():
    meta = {"seeds": 2, "jobs": 10, "nodes": 4, "limits": "overestimate=2"}
    kept = {**meta, "results": {"fifo": _runs([1.0, 2.0]), "easy-limit": _runs([3.0, 4.0])}}
    fresh = {**meta, "results": {"fifo+greedy": _runs([5.0, 6.0]), "easy-limit": _runs([7.0, 8.0])}}
    got = merge_results(kept, fresh)
    assert list(got["results"]) == ["fifo", "fifo+greedy", "easy-limit"]   # VARIANTS order
    assert got["results"]["easy-limit"] == _runs([7.0, 8.0]) and got["results"]["fifo"] == _runs([1.0, 2.0])
    with pytest.raises(ValueError, match="--update: the kept results have jobs=10, this run 20"):
        merge_results(kept, {**fresh, "jobs": 20})
    assert got["workload"] == "Built-in workload"   # a file without the key is the built-in workload's
    philly = {**fresh, "workload": "Philly reference window"}
    with pytest.raises(ValueError, match="the kept results have workload='Built-in workload', this run 'Philly"):
        merge_results(kept, philly)
    assert merge_results({**kept, "workload": "Philly reference window"}, philly)["workload"] == "Philly reference window"


def test_update_reruns_some_variants_and_gives_the_numbers_of_a_whole_run(tmp_path):
    whole, part = tmp_path / "whole.json", tmp_path / "part.json"
    small = ["experiment", "backfill", "--seeds", "2", "--jobs", "60", "--nodes", "2"]
    assert CliRunner().invoke(app, [*small, "--variants", "fifo,easy-limit,conservative-limit",
                                    "--results", str(whole)]).exit_code == 0
    import json

    data = json.loads(whole.read_text())
    assert list(data["results"]) == ["fifo", "easy-limit", "conservative-limit"]
    stale = {**data, "results": {**data["results"], "conservative-limit": _runs([0.0, 0.0])}}
    part.write_text(json.dumps(stale))
    res = CliRunner().invoke(app, [*small, "--variants", "conservative-limit", "--update", "--results", str(part)])
    assert res.exit_code == 0, res.output
    assert "note: --update kept 2 variants" in res.output and "replaced 1" in res.output
    assert json.loads(part.read_text()) == data   # the rerun variant's rows are a whole run's
    assert "| conservative-limit - easy-limit |" in res.output


def test_a_variant_gives_the_same_numbers_after_another_on_the_same_jobs():
    """The variants of a seed share one job list; a policy's predictions (``pred_duration``) from
    the variant before must not leak into the next. They did: ``conservative-pred`` after
    ``easy-pred`` planned with easy-pred's estimates (mean JCT 12,841 s here, 13,861 s alone)."""
    from dlsched.experiments.dlsched.backfill import VARIANTS, run_variants

    by = {v.label: v for v in VARIANTS}
    after = run_variants(1, 500, nodes=16, variants=(by["easy-pred"], by["conservative-pred"]))
    alone = run_variants(1, 500, nodes=16, variants=(by["conservative-pred"],))
    assert after["conservative-pred"] == alone["conservative-pred"]
    assert alone["conservative-pred"][0]["avg_jct"] == pytest.approx(13860.89, abs=0.01)

