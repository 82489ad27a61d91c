"""The preemption experiment's statistics (hand numbers) and its command's bad-input errors."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.experiments.dlsched.preemption import markdown, paired_difference, table


def test_paired_difference_hand_numbers():
    d = paired_difference([100.0, 200.0, 300.0], [90.0, 190.0, 310.0])  # diffs -10, -10, +10
    assert d.mean == pytest.approx(-10 / 3) and d.wins == 2 and d.seeds == 3
    # stdev of the diffs = 11.547; t(0.975, 2) = 4.303 -> half width 28.69
    assert d.high - d.mean == pytest.approx(4.302653 * 11.547005 / 3 ** 0.5, rel=1e-5)
    with pytest.raises(ValueError, match="equal, non-empty"):
        paired_difference([1.0], [])


def test_table_pairs_every_variant_with_the_baseline():
    runs = {"qssf": [{"avg_jct": 100.0, "p95_jct": 500.0, "preemptions": 0},
                     {"avg_jct": 200.0, "p95_jct": 900.0, "preemptions": 0}],
            "srtf-pred": [{"avg_jct": 80.0, "p95_jct": 450.0, "preemptions": 4},
                          {"avg_jct": 190.0, "p95_jct": 950.0, "preemptions": 6}]}
    rows = table(runs, "qssf")
    assert rows[0] == {"variant": "qssf", "seeds": 2, "evictions": 0, "avg_jct": 150.0, "p95_jct": 700.0}
    row = rows[1]
    assert (row["evictions"], row["avg_jct"], row["d_avg_jct"], row["avg_jct_wins"]) == (5, 135.0, -15.0, 2)
    assert (row["d_p95_jct"], row["p95_jct_wins"]) == (0.0, 1)
    text = markdown(rows, "qssf", 2, 100, 1.0)
    assert "| srtf-pred | 135 | 700 | 5.0 | -15 [" in text and "| qssf | 150 | 700 | 0.0 | (baseline)" in text
    with pytest.raises(ValueError, match="baseline 'fifo' is not one of the variants"):
        table(runs, "fifo")


@pytest.mark.parametrize("args, message", [
    (["--baseline", "sjf"], "--baseline 'sjf' is not one of the variants"),
    (["--seeds", "0"], "--seeds must be between 1 and 1,000"),
    (["--jobs", "0"], "--jobs must be >= 1, got 0"),
])
def test_bad_input_is_one_error_line(args, message):
    res = CliRunner().invoke(app, ["experiment", "preemption", *args])
    assert res.exit_code == 2 and "error: " in res.output and message in res.output
    assert "Traceback" not in res.output
