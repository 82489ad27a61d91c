"""Per-queue figures of a two-level queue tree in the HTML report and in simulate's terminal table."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.metrics.queue_rows import queue_rows
from dlsched.report import build_report

TREE = Path(__file__).resolve().parent.parent / "docs" / "examples" / "queues-tree.toml"
LEAVES = [f"vc0{i}" for i in range(1, 9)]
INNER = ["org", "research", "production"]


@pytest.fixture(scope="module")
def tree_run(tmp_path_factory) -> tuple[Path, str, dict]:
    out = tmp_path_factory.mktemp("tree")
    res = CliRunner().invoke(app, ["simulate", "--cluster", str(TREE), "--jobs", "800", "--policy", "qssf",
                                   "--out", str(out)], env={"COLUMNS": "220"})
    assert res.exit_code == 0, res.output
    assert "Traceback" not in res.output
    return out, res.output, json.loads((out / "summary.json").read_text())


def _rows(page: str) -> dict[str, list[str]]:
    """The queues table's rows: queue name -> its cells' text (tags stripped)."""
    table = re.search(r'<table class="queues">(.*?)</table>', page, re.S)
    assert table, "no per-queue table in the report"
    rows = {}
    for head, cells in re.findall(r'<tr><th scope="row">(.*?)</th>(.*?)</tr>', table.group(1), re.S):
        name = re.sub(r"<[^>]+>", "", head).replace("(inner)", "").strip()
        rows[name] = [re.sub(r"<[^>]+>", "", c).strip() for c in re.findall(r"<td>(.*?)</td>", cells, re.S)]
    return rows


def test_report_lists_every_queue_of_the_tree_with_its_figures(tree_run) -> None:
    out, _, summary = tree_run
    page = build_report(out).read_text()
    assert 'id="queues"' in page
    rows = _rows(page)
    assert list(rows) == ["org", "research", "vc01", "vc02", "vc03", "production", "vc04", "vc05", "vc06",
                          "vc07", "vc08"]
    for name in LEAVES:
        q = summary["per_queue"][name]
        cells = rows[name]
        assert cells[0] == str(q["guarantee_gpus"])
        assert cells[5] == f"{q['used_gpu_hours']:,.1f}"
        assert cells[6] == f"{q['borrowed_gpu_hours']:,.1f}"
        assert cells[12] == str(q["jobs"])
    for name in INNER:
        q = summary["per_inner_queue"][name]
        under = [summary["per_queue"][v] for v in q["queues"]]
        cells = rows[name]
        assert cells[0] == str(q["guarantee_gpus"])
        assert cells[5] == f"{q['used_gpu_hours']:,.1f}"
        assert cells[4] == f"{sum(v['guaranteed_gpu_hours'] for v in under):,.1f}"
        assert cells[12] == str(sum(v["jobs"] for v in under))
    assert rows["org"][12] == str(summary["jobs"])  # the top queue holds every job
    assert rows["research"][1] == "128" and rows["production"][2] == "96"  # the inner queues' own limits
    assert rows["vc01"][1] == "V100 128"
    assert page.count("(inner)") >= 3


def test_terminal_table_lists_inner_queues_indented(tree_run) -> None:
    _, text, summary = tree_run
    lines = [line for line in text.splitlines() if "(inner)" in line or re.search(r"\bvc0\d\b", line)]
    names = [re.sub(r"[│┃|]", " ", line).split()[0] for line in lines]
    assert names[:3] == ["org", "research", "vc01"]
    assert "production" in names and names.index("production") == names.index("vc03") + 1
    research = next(line for line in lines if "research (inner)" in line)
    org = next(line for line in lines if "org (inner)" in line)
    vc01 = next(line for line in lines if " vc01 " in line)
    assert org.index("org") < research.index("research") < vc01.index("vc01")  # indented by depth
    assert f"{summary['per_inner_queue']['research']['used_gpu_hours']:,.1f}" in research
    assert "note: Inner queues" in text


def test_inner_figures_are_sums_and_a_job_weighted_delay() -> None:
    summary = {
        "per_queue": {
            "a": {"parent": "g", "guaranteed_gpu_hours": 10.0, "used_gpu_hours": 4.0, "borrowed_gpu_hours": 1.0,
                  "lent_gpu_hours": 0.0, "reclaimed": 1, "reclaims": 0, "jobs": 3, "avg_queue_delay": 10.0},
            "b": {"parent": "g", "guaranteed_gpu_hours": 30.0, "used_gpu_hours": 6.0, "borrowed_gpu_hours": 0.0,
                  "lent_gpu_hours": 1.0, "reclaimed": 0, "reclaims": 1, "jobs": 1, "avg_queue_delay": 50.0},
            "c": {"parent": "nowhere", "guaranteed_gpu_hours": 5.0, "used_gpu_hours": 1.0, "jobs": 0,
                  "avg_queue_delay": 0.0},
        },
        "per_inner_queue": {"g": {"parent": None, "queues": ["a", "b"], "used_gpu_hours": 10.0}},
    }
    rows = queue_rows(summary)
    assert [(r.name, r.depth, r.inner) for r in rows] == [("g", 0, True), ("a", 1, False), ("b", 1, False),
                                                          ("c", 0, False)]
    g = rows[0].figures
    assert g["guaranteed_gpu_hours"] == 40.0 and g["jobs"] == 4 and g["reclaimed"] == 1 and g["reclaims"] == 1
    assert g["avg_queue_delay"] == pytest.approx((3 * 10.0 + 50.0) / 4)
    assert g["share_of_guarantee"] == pytest.approx(10.0 / 40.0)
    assert rows[3].parent == "nowhere"  # an unknown parent keeps the queue, at the top level


def test_a_cycle_in_a_hand_edited_summary_drops_no_queue() -> None:
    summary = {"per_queue": {"a": {"parent": "x"}},
               "per_inner_queue": {"x": {"parent": "y", "queues": ["a"]}, "y": {"parent": "x", "queues": ["a"]}}}
    assert sorted(r.name for r in queue_rows(summary)) == ["a", "x", "y"]


def test_no_queue_section_without_borrowing(tmp_path) -> None:
    res = CliRunner().invoke(app, ["simulate", "--jobs", "300", "--policy", "fifo", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    page = build_report(tmp_path).read_text()
    assert 'id="queues"' not in page and "(inner)" not in res.output
