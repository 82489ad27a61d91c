"""Between-policy comparisons of the sharing tables (issue 36 point 5): every pair, paired per seed,
Bonferroni-corrected, "tied" where the CI spans 0, and the seed rule that extends close pairs."""

from __future__ import annotations

import math

import pytest
from typer.testing import CliRunner

from dlsched.experiments.sharing.pairwise import comparisons, rule_text, run_with_seed_rule
from dlsched.experiments.sharing.run import RunResult
from dlsched.sweep.stats import pairwise_paired, replicates_needed, t95


def test_one_pair_is_the_plain_95_percent_interval():
    (d,) = pairwise_paired({"a": [3.0, 4.0, 5.0], "b": [1.0, 1.0, 1.0]})
    # differences 2, 3, 4: mean 3, sd 1, half-width t(0.975, 2) / sqrt(3)
    assert (d.mean, d.n, d.wins_a, d.pairs, d.level) == (3.0, 3, 3, 1, 0.95)
    assert d.high - d.mean == pytest.approx(t95(2) / math.sqrt(3), abs=1e-3)
    assert d.verdict == "a better" and not d.tied


def test_three_pairs_are_bonferroni_corrected_and_tied_is_read_off_the_interval():
    values = {"x": [0.10, 0.12, 0.11, 0.13, 0.09, 0.10, 0.12, 0.11, 0.10, 0.12],
              "y": [0.10, 0.11, 0.12, 0.12, 0.10, 0.09, 0.12, 0.12, 0.10, 0.11],
              "z": [0.00, 0.02, 0.01, 0.03, -0.01, 0.00, 0.02, 0.01, 0.00, 0.02]}
    pairs = {(d.a, d.b): d for d in pairwise_paired(values)}
    assert list(pairs) == [("x", "y"), ("x", "z"), ("y", "z")]
    xy, xz, yz = pairs.values()
    assert xy.level == pytest.approx(1 - 0.05 / 3) and xy.pairs == 3
    # t(1 - 0.05/6, 9) = 2.933 (tables: between t(0.99, 9) = 2.821 and t(0.995, 9) = 3.250), wider than 2.262
    d = [a - b for a, b in zip(values["x"], values["y"])]
    mean = sum(d) / 10
    sd = math.sqrt(sum((v - mean) ** 2 for v in d) / 9)
    assert xy.high - xy.mean == pytest.approx(2.933 * sd / math.sqrt(10), rel=1e-3)
    assert xy.tied and xy.verdict == "tied" and xy.low < 0 < xy.high
    assert xz.mean == pytest.approx(0.1) and xz.verdict == "x better"
    assert yz.verdict == "y better" and pairwise_paired({"only": [1.0]}) == []


def test_b_better_and_too_few_seeds():
    (d,) = pairwise_paired({"a": [0.0, 0.1, 0.0], "b": [1.0, 1.2, 1.1]})
    assert d.verdict == "b better" and d.wins_a == 0
    (one,) = pairwise_paired({"a": [1.0], "b": [0.0]})
    assert one.tied and math.isnan(one.low)


def test_replicates_needed_by_hand():
    # differences with mean 1 and sd 1: t(0.975, 5)/sqrt(6) = 1.05 > 1, t(0.975, 6)/sqrt(7) = 0.925 < 1
    a = [1 + x for x in (-1.0, 1.0, -1.0, 1.0)]
    sd = math.sqrt(sum(x * x for x in (-1.0, 1.0, -1.0, 1.0)) / 3)
    assert replicates_needed([v / sd for v in a], [0.0] * 4, 0.95) is not None
    assert replicates_needed([2.0, 0.0, 2.0, 0.0, 2.0, 0.0], [1.0] * 6, 0.95) is None  # mean 0
    d = [1 + s * math.sqrt(5 / 6) for s in (1, -1, 1, -1, 1, -1)]  # mean 1, sd 1 (ddof 1)
    assert replicates_needed(d, [0.0] * 6, 0.95) == 7
    assert replicates_needed([1.0, 1.0], [0.0, 0.0], 0.95) == 2


def _runs(seeds: list[int], offsets: dict[str, float]) -> dict[str, list[RunResult]]:
    """Makespans per seed: base 100 (+seed noise), each label lower by its offset, noise by seed."""
    noise = [0.0, 1.5, -1.0, 2.0, -2.5, 0.5, 1.0, -1.5, 2.5, -0.5]
    out = {"base": [RunResult("base", s, {"makespan": 100.0}) for s in seeds]}
    for label, off in offsets.items():
        sign = 1 if label == "A" else -1
        out[label] = [RunResult(label, s, {"makespan": 100.0 - off + sign * noise[s % 10]}) for s in seeds]
    return out


def test_seed_rule_extends_a_close_pair_and_keeps_seeds_paired():
    offsets = {"A": 10.0, "B": 8.0}  # A - B: 2 points of gain on average, spread ~3.4 points: close
    calls = []

    def run(seeds):
        calls.append(list(seeds))
        return _runs(seeds, offsets)

    first = comparisons(_runs(list(range(10)), offsets), "base", "makespan")
    (ab,) = first
    assert ab["verdict"] == "tied" and 10 < ab["seeds_needed"] <= 30
    runs, seeds, rule = run_with_seed_rule(run, list(range(10)), "base", "makespan", 30)
    assert calls == [list(range(10)), list(range(10, ab["seeds_needed"]))]
    assert seeds == list(range(ab["seeds_needed"])) and [r.seed for r in runs["B"]] == seeds
    assert rule["seeds_run"] == ab["seeds_needed"] and rule["extended_for"][0].startswith("A / B")
    assert "extended for the close pair(s) A / B" in rule_text(rule) and "bonferroni" in rule_text(rule)


def test_seed_rule_leaves_quick_looks_far_pairs_and_max_none_alone():
    for seeds, max_seeds, offsets in ((list(range(5)), 30, {"A": 10.0, "B": 9.0}),
                                      (list(range(10)), None, {"A": 10.0, "B": 9.0}),
                                      (list(range(10)), 30, {"A": 10.0, "B": 10.0}),  # mean 0: never separates
                                      (list(range(10)), 30, {"A": 30.0, "B": 0.0})):  # decided at 10
        calls: list = []
        _, got, rule = run_with_seed_rule(lambda s, o=offsets, c=calls: c.append(s) or _runs(s, o), seeds, "base",
                                          "makespan", max_seeds)
        assert len(calls) == 1 and got == seeds and rule["seeds_run"] == len(seeds) and not rule["extended_for"]
        if max_seeds and len(seeds) == 10:
            assert "(protocol: 10; no tied pair would separate within 30 seeds)" in rule_text(rule)
    assert "not extended" in rule_text({"seeds_run": 5, "seeds_asked": 5, "max_seeds": 30, "extended_for": [],
                                        "correction": "bonferroni"})


def test_cli_prints_every_pair_and_refuses_a_bad_max_seeds():
    from dlsched.cli.main import app

    runner = CliRunner()
    bad = runner.invoke(app, ["experiment", "coscheml", "--seeds", "2", "--max-seeds", "-3"])
    assert bad.exit_code == 2 and "error: --max-seeds must be between 0 and" in bad.output
    assert "Traceback" not in bad.output
    res = runner.invoke(app, ["experiment", "coscheml", "--seeds", "2"])
    assert res.exit_code == 0, res.output
    assert "between policies" in res.output and "Bonferroni" in res.output
    assert res.output.count("Loadbalance") >= 4  # its row and its three pairs
    assert "seeds: 2 seeds (fixed; not extended by the seed rule)" in res.output.replace("\n", " ")


def test_report_renders_the_pairs_and_the_seed_rule(tmp_path):
    import json

    from dlsched.report import build_report

    gains = {"Horus": [0.20, 0.22, 0.25, 0.21], "OBP": [0.19, 0.18, 0.26, 0.20]}
    runs = {"FIFO": [RunResult("FIFO", s, {"makespan": 100.0}) for s in range(4)]}
    for label, gs in gains.items():
        runs[label] = [RunResult(label, s, {"makespan": 100.0 * (1 - g)}) for s, g in enumerate(gs)]
    pairs = comparisons(runs, "FIFO", "makespan")
    (p,) = pairs
    assert (p["a"], p["b"], p["n"], p["wins_a"]) == ("Horus", "OBP", 4, 3)
    assert p["diff"] == pytest.approx(0.0125) and p["verdict"] == "tied"
    rule = {"seeds_asked": 4, "seeds_run": 4, "max_seeds": 30, "extended_for": [], "correction": "bonferroni"}
    result = {"experiment": "compare", "seeds": [0, 1, 2, 3], "seconds": 1.0,
              "rows": [{"policy": "Horus", "gain": 0.22}], "pairs": pairs, "seed_rule": {"": rule}}
    (tmp_path / "sharing_experiment.json").write_text(json.dumps(result))
    page = build_report(tmp_path).read_text()
    assert "Between policies (paired per seed, Bonferroni-corrected)" in page
    assert "+1.2" in page and "tied" in page and "4 seeds (fixed; not extended by the seed rule)" in page
    assert "seed_rule =" not in page  # the settings line leaves the pairs to their own table
