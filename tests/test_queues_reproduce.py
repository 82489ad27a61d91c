"""`dlsched reproduce queues-borrowing`: fixed VCs against queues that borrow, and the per-queue
tables a reproduction shows when its run has queues: each queue's wait on the fixed VCs beside its
wait with borrowing, the tree's inner queues indented, readable at 80 columns (issue 37)."""

from __future__ import annotations

import json

from rich.console import Console

from dlsched.reproduce.queues import QueuesBorrowing, delay_table, fixed_delay, per_queue_table
from dlsched.reproduce.registry import REPRODUCTIONS
from dlsched.reproduce.render import print_result, run_reproduction


def test_queues_reproduction_reports_per_queue(tmp_path):
    repro = QueuesBorrowing()
    repro.jobs = 3000  # the registered one runs 20,000 jobs; the tables are the same shape
    result = run_reproduction(repro, tmp_path / "no-shared-needed", tmp_path / "out")
    summary, waits, queues = result.tables
    assert summary.columns == ["figure", "fixed VCs", "borrowing", "borrowing / fixed"]
    fixed_s = json.loads((tmp_path / "out" / "queues-fixed" / "summary.json").read_text())
    on_disk = json.loads((tmp_path / "out" / "queues" / "summary.json").read_text())
    delay = summary.rows[0]
    assert delay[:3] == ["avg queue delay (s)", round(fixed_s["avg_queue_delay"]), round(on_disk["avg_queue_delay"])]
    assert delay[3] == round(on_disk["avg_queue_delay"] / fixed_s["avg_queue_delay"], 3) and delay[2] < delay[1]
    reclaims = summary.rows[3]
    assert reclaims[:3] == ["reclaims", 0, sum(q["reclaims"] for q in on_disk["per_queue"].values())] and reclaims[2] > 0
    names = [f"vc0{i}" for i in range(1, 9)]
    assert [row[0] for row in waits.rows] == [row[0] for row in queues.rows] == list(on_disk["per_queue"]) == names
    for row in waits.rows:   # each VC's wait on the fixed VCs beside its wait with borrowing
        before, after = fixed_s["per_vc"][row[0]], on_disk["per_queue"][row[0]]
        assert row[2] == after["jobs"] == before["jobs"]
        assert row[3:6] == [round(before["avg_queue_delay"]), round(after["avg_queue_delay"]),
                            round(after["avg_queue_delay"] - before["avg_queue_delay"])]
        assert row[6:8] == [after["reclaims"], after["reclaimed"]]
    q = on_disk["per_queue"]["vc01"]
    assert queues.rows[0][1:] == [round(q["guaranteed_gpu_hours"]), round(q["used_gpu_hours"]),
                                  round(q["borrowed_gpu_hours"]), round(q["lent_gpu_hours"]),
                                  round(q["decayed_usage_gpu_hours"] / q["weight"])]
    assert "weight" not in queues.columns and "every queue has weight 1" in queues.note
    assert "Jain's index" in queues.note and REPRODUCTIONS["queues-borrowing"].jobs == 20000
    console = Console(width=80, record=True)
    print_result(result, console)
    text = console.export_text()
    table_lines = [ln for ln in text.splitlines() if ln[:1] in "┏┃┡│└"]
    assert max(len(ln) for ln in table_lines) <= 80 and "…" not in text   # nothing cut at 80 columns
    body = [ln for ln in table_lines if ln.startswith("│ vc")]   # the per-queue tables' rows, in print order
    assert len(body) == len(waits.rows) + len(queues.rows)
    for row, line in zip(waits.rows + queues.rows, body):
        assert [c.strip() for c in line.strip("│").split("│")] == [f"{v:,}" if isinstance(v, int) else str(v)
                                                                     for v in row]


def _tree_summary() -> dict:
    leaf = {"guarantee_gpus": 8, "guaranteed_gpu_hours": 80.0, "used_gpu_hours": 40.0, "borrowed_gpu_hours": 4.0,
            "lent_gpu_hours": 2.0, "reclaims": 1, "reclaimed": 0, "weight": 1.0, "usage_per_weight": 30.0}
    return {"per_queue": {"a": {**leaf, "parent": "org", "jobs": 10, "avg_queue_delay": 100.0},
                          "b": {**leaf, "parent": "org", "jobs": 30, "avg_queue_delay": 20.0, "weight": 2.0},
                          "c": {**leaf, "jobs": 5, "avg_queue_delay": 0.0}},
            "per_inner_queue": {"org": {"queues": ["a", "b"], "guarantee_gpus": 16, "weight": 1.0,
                                        "used_gpu_hours": 80.0, "usage_per_weight": 60.0}}}


def test_a_tree_shows_inner_queues_indented_with_job_weighted_fixed_waits():
    borrow = _tree_summary()
    fixed = {"per_vc": {"a": {"jobs": 10, "avg_queue_delay": 400.0}, "b": {"jobs": 30, "avg_queue_delay": 40.0},
                        "c": {"jobs": 5, "avg_queue_delay": 10.0}}}
    waits = delay_table(borrow, fixed, "w")
    assert [row[0] for row in waits.rows] == ["org (inner)", "  a", "  b", "c"]
    org = waits.rows[0]
    # org's jobs: 10 waiting 400 s and 30 waiting 40 s on the fixed VCs -> 130 s; with loans 40 s
    assert org[1:6] == [16, 40, 130, 40, -90] and org[6:8] == [2, 0]
    assert waits.rows[1][3:6] == [400, 100, -300] and waits.rows[3][3:6] == [10, 0, -10]
    queues = per_queue_table(borrow, "q")
    assert queues.columns[1] == "weight" and [row[1] for row in queues.rows] == [1.0, 1.0, 2.0, 1.0]
    assert queues.rows[0][2:6] == [160, 80, 8, 4]   # the inner queue's GPU time summed over a and b
    assert "Inner queues" in queues.note


def test_fixed_wait_of_a_queue_the_fixed_run_lacks_is_a_dash():
    borrow = _tree_summary()
    rows = delay_table(borrow, {"per_vc": {}}, "w").rows
    assert all(row[3] is None and row[5] is None for row in rows)
    from dlsched.metrics.queue_rows import queue_rows

    assert fixed_delay(queue_rows(borrow)[0], queue_rows(borrow), {"a": {"jobs": 0, "avg_queue_delay": 0.0}}) is None


def test_no_queues_no_table():
    assert per_queue_table({"avg_jct": 1.0}, "x") is None
    assert delay_table({"avg_jct": 1.0}, {}, "x") is None
