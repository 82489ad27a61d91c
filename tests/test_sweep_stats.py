"""Across-seed statistics on hand-checked numbers, and the sweep report page."""

from __future__ import annotations

import math
import re
import textwrap

import pandas as pd
import pytest

from dlsched.report import build_report
from dlsched.report.layout import Layout, detect_layout
from dlsched.sweep.engine_local import LocalEngine
from dlsched.sweep.run import run_sweep
from dlsched.sweep.spec import load_spec
from dlsched.sweep.stats import ci95, seed_stats, t95


def test_t_quantiles():
    assert t95(1) == 12.706 and t95(2) == 4.303 and t95(30) == 2.042
    assert t95(40) == pytest.approx(2.021) and t95(120) == pytest.approx(1.980)
    assert t95(10**9) == pytest.approx(1.960, abs=1e-6)
    assert 2.000 < t95(50) < 2.021  # t(0.975, 50) = 2.009
    assert t95(50) == pytest.approx(2.009, abs=0.002)
    assert math.isnan(t95(0))


def test_ci95_by_hand():
    # 1, 2, 3: mean 2, sample sd 1, half-width 4.303 / sqrt(3) = 2.4843
    assert ci95(pd.Series([1.0, 2.0, 3.0]).to_numpy()) == pytest.approx(4.303 / math.sqrt(3))
    assert math.isnan(ci95(pd.Series([5.0]).to_numpy()))
    assert ci95(pd.Series([4.0, 4.0, float("nan")]).to_numpy()) == 0.0


def _table() -> pd.DataFrame:
    rows = []
    for policy, nodes, seed, jct in [("fifo", 8, 0, 100.0), ("fifo", 8, 1, 200.0), ("fifo", 8, 2, 300.0),
                                     ("sjf", 8, 0, 50.0), ("sjf", 8, 1, 50.0), ("sjf", 8, 2, 80.0),
                                     ("fifo", 16, 0, 40.0), ("fifo", 16, 1, 60.0),
                                     ("sjf", 16, 0, 30.0), ("sjf", 16, 1, 30.0),
                                     ("sjf", 32, 0, 10.0)]:
        rows.append({"cell": f"{policy}{nodes}{seed}", "policy": policy, "nodes": nodes, "seed": seed,
                     "status": "done", "error": None, "avg_jct": jct, "wall_s": 1.0})
    rows.append({"cell": "x", "policy": "sjf", "nodes": 8, "seed": 3, "status": "failed", "error": "boom",
                 "avg_jct": float("nan"), "wall_s": 0.0})
    return pd.DataFrame(rows)


def test_seed_stats_means_intervals_and_baseline_ratios():
    stats, missing = seed_stats(_table(), ["policy", "nodes", "seed"], "seed", {"policy": "fifo"})
    stats = stats.set_index(["policy", "nodes"])
    assert stats.loc[("fifo", 8), "n"] == 3  # the failed cell is not a repetition
    assert stats.loc[("fifo", 8), "avg_jct.mean"] == 200.0
    assert stats.loc[("fifo", 8), "avg_jct.ci95"] == pytest.approx(4.303 * 100 / math.sqrt(3))
    assert stats.loc[("sjf", 8), "avg_jct.mean"] == 60.0
    assert stats.loc[("sjf", 8), "avg_jct.ratio"] == pytest.approx(0.3)   # 60 / 200, same nodes
    assert stats.loc[("sjf", 16), "avg_jct.ratio"] == pytest.approx(0.6)  # 30 / 50
    assert stats.loc[("fifo", 16), "avg_jct.ci95"] == pytest.approx(12.706 * math.sqrt(200) / math.sqrt(2))
    assert math.isnan(stats.loc[("sjf", 32), "avg_jct.ratio"]) and missing == 1  # no fifo at 32 nodes
    assert "wall_s.mean" in stats.columns and "seed.mean" not in stats.columns


def test_seed_stats_rejects_a_baseline_that_is_not_in_the_sweep():
    with pytest.raises(ValueError, match="placement is not a parameter of this sweep"):
        seed_stats(_table(), ["policy", "nodes", "seed"], "seed", {"placement": "spread"})
    with pytest.raises(ValueError, match="policy=srtf: no finished cell has these values"):
        seed_stats(_table(), ["policy", "nodes", "seed"], "seed", {"policy": "srtf"})


def test_report_of_a_sweep_has_one_plot_per_swept_parameter(tmp_path):
    spec = tmp_path / "spec.yaml"
    spec.write_text(textwrap.dedent("""
        base: {jobs: 500}
        grid:
          policy: [fifo, sjf]
          nodes: [24, 32]
          seed: [0, 1]
        baseline: {policy: fifo}
        """))
    run_sweep(load_spec(spec), tmp_path / "out", LocalEngine(2), emit=lambda line: None)
    assert detect_layout(tmp_path / "out") is Layout.SWEEP
    page = build_report(tmp_path / "out").read_text()
    assert re.findall(r"<h2>(.*?)</h2>", page) == ["Figures vs policy", "Figures vs nodes",
                                                   "Mean ± 95 % CI over seed"]
    assert page.count("data:image/png;base64,") == 2
    assert "one line per policy" in page and "×0." in page
