"""`dlsched reproduce queues-borrowing`: fixed VCs against queues that borrow, and the per-queue
table a reproduction shows when its run has queues."""

from __future__ import annotations

import json

from dlsched.reproduce.queues import QueuesBorrowing, per_queue_table
from dlsched.reproduce.registry import REPRODUCTIONS
from dlsched.reproduce.render import run_reproduction


def test_queues_reproduction_reports_per_queue(tmp_path):
    repro = QueuesBorrowing()
    repro.jobs = 3000  # the registered one runs 20,000 jobs; the tables are the same shape
    result = run_reproduction(repro, tmp_path / "no-shared-needed", tmp_path / "out")
    summary, queues = result.tables
    (fixed, borrow) = summary.rows
    assert fixed[0].startswith("fixed") and fixed[4] == 0 and borrow[4] > 0
    assert borrow[1] < fixed[1]  # borrowing cuts the average wait on this seed
    on_disk = json.loads((tmp_path / "out" / "queues" / "summary.json").read_text())
    assert [row[0] for row in queues.rows] == list(on_disk["per_queue"]) == [f"vc0{i}" for i in range(1, 9)]
    vc01 = queues.rows[0]
    q = on_disk["per_queue"]["vc01"]
    assert vc01[1:3] == [256, 1.0] and vc01[7:9] == [q["reclaims"], q["reclaimed"]]
    assert vc01[10] == round(q["decayed_usage_gpu_hours"] / q["weight"], 1)
    assert "Jain's index" in queues.note and REPRODUCTIONS["queues-borrowing"].jobs == 20000


def test_no_queues_no_table():
    assert per_queue_table({"avg_jct": 1.0}, "x") is None
