"""Wide sharing tables are split into tables that fit (the browser check is in test_report_browser.py)."""

from __future__ import annotations

from dlsched.report.sections_sharing import sharing_sections
from dlsched.report.sharing_columns import MAX_COLUMNS, column_groups

TABLE6 = ["workload", "policy", "makespan_min", "makespan_std_min", "gain", "gain_ci_low", "gain_ci_high", "wins",
          "avg_jct_s", "busy_util", "delivered_util", "failures", "oom_called_off", "requeued",
          "paper_makespan_min", "paper_std_min", "paper_gain"]
ROW = {k: ("w" if k == "workload" else "FIFO" if k == "policy" else 1.5) for k in TABLE6}


def test_table6_puts_the_paper_beside_ours_and_keeps_every_column() -> None:
    groups = column_groups(TABLE6, [ROW, ROW])
    assert groups[0] == ("Ours beside the paper's", ["workload", "policy", "makespan_min", "paper_makespan_min",
                                                     "makespan_std_min", "paper_std_min", "gain", "paper_gain"])
    shown = [c for _, cols in groups for c in cols[2:]]
    assert sorted(shown) == sorted(TABLE6[2:]) and len(shown) == len(set(shown))  # each once, none dropped
    assert all(cols[:2] == ["workload", "policy"] and len(cols) - 2 <= MAX_COLUMNS for _, cols in groups)


def test_a_narrow_table_stays_one_table() -> None:
    keys = ["workload", "policy", "makespan_min", "paper_makespan_min"]
    assert column_groups(keys, [dict.fromkeys(keys, "x")]) == [("", keys)]


def test_many_columns_without_paper_figures_split_in_chunks() -> None:
    keys = ["policy", *(f"m{i}" for i in range(2 * MAX_COLUMNS + 1))]
    groups = column_groups(keys, [{"policy": "a", **{k: 1.0 for k in keys[1:]}}])
    assert [len(cols) - 1 for _, cols in groups] == [MAX_COLUMNS, MAX_COLUMNS, 1]


def test_sharing_section_renders_every_column_header() -> None:
    body = sharing_sections({"experiment": "horus-table6", "rows": [ROW]})[0].body.replace("<wbr>", "")
    for key in TABLE6:
        assert f"<th>{key}</th>" in body
    assert body.count("<table") == 2
