"""`dlsched reproduce`: the registry, the output forms, and our figures beside the paper's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.reproduce.base import Reproduction
from dlsched.reproduce.registry import REPRODUCTIONS
from dlsched.reproduce.render import run_reproduction

runner = CliRunner()


def _rows(result, table: int = 0) -> dict[str, list]:
    return {row[0]: row[1:] for row in result.tables[table].rows}


def test_registry_lists_every_paper_result_with_its_source_and_command():
    assert set(REPRODUCTIONS) >= {"helios-table5", "helios-qssf-philly", "helios-qssf-builtin", "helios-fidelity",
                                  "topo-table1", "topo-scenario1", "topo-scenario2"}
    for name, repro in REPRODUCTIONS.items():
        assert isinstance(repro, Reproduction) and repro.name == name
        assert repro.title and repro.paper and repro.command.startswith("dlsched ")
    res = runner.invoke(app, ["reproduce", "--list", "--json"])
    assert res.exit_code == 0
    listed = json.loads(res.output)
    assert [r["name"] for r in listed] == list(REPRODUCTIONS)
    assert next(r for r in listed if r["name"] == "helios-table5")["needs"] == [
        "traces/philly/philly_node_sequence.csv.gz"]


def test_topology_table1_beside_the_paper(tmp_path):
    result = run_reproduction(REPRODUCTIONS["topo-table1"], tmp_path / "no-shared-needed")
    rows = _rows(result)
    # policy: cumulative ours, paper, slower-than-P ours, paper, makespan, slowdown, SLO, postponements
    assert rows["FCFS"][:4] == [484.14, 456.2, 1.26, 1.28]
    assert rows["TOPO-AWARE-P"][:4] == [385.415, 356.9, 1.0, 1.0]
    assert rows["Best-Fit"][3] == 1.29 and rows["TOPO-AWARE"][3] == 1.27  # 461.7 / 356.9, 454.2 / 356.9
    assert rows["TOPO-AWARE-P"][6:] == [0, 3] and rows["FCFS"][6] == 3


def test_scenario1_checks_the_papers_claims(tmp_path):
    result = run_reproduction(REPRODUCTIONS["topo-scenario1"], tmp_path)
    ours, claims = _rows(result, 0), result.tables[1].rows
    assert ours["TOPO-AWARE-P"][0] == min(r[0] for r in ours.values())  # mean slowdown
    assert claims[0] == ["TOPO-AWARE-P has the lowest mean slowdown", "TOPO-AWARE-P", "holds"]
    assert claims[1] == ["TOPO-AWARE-P has no SLO violations", 0, "holds"]


def test_json_and_html_outputs(tmp_path):
    page = tmp_path / "out" / "repro.html"
    res = runner.invoke(app, ["reproduce", "topo-table1", "--json", "--html", str(page), "--out", str(tmp_path / "runs")])
    assert res.exit_code == 0, res.output
    data = json.loads(res.output[res.output.index("[\n"):])  # stderr (the HTML path) is mixed in here
    assert data[0]["name"] == "topo-table1" and data[0]["tables"][0]["rows"][0][0] == "FCFS"
    text = page.read_text()
    assert "<table" in text and "TOPO-AWARE-P" in text and "456.2" in text
    assert (tmp_path / "runs" / "topo-table1" / "topo-prototype" / "summary.json").is_file()


@pytest.mark.parametrize(("args", "message"), [
    (["reproduce", "nosuch"], "error: unknown reproduction 'nosuch'; choose from helios-fidelity"),
    (["reproduce"], "error: name a reproduction"),
    (["reproduce", "helios-table5", "--shared", "/nonexistent"],
     "error: reproduce helios-table5 needs /nonexistent/traces/philly/philly_node_sequence.csv.gz (not found"),
])
def test_bad_input_is_one_error_line(args, message):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(message)


def test_helios_table5_beside_the_paper(shared):
    result = run_reproduction(REPRODUCTIONS["helios-table5"], shared)
    rows = _rows(result)
    assert rows["avg powered-off nodes"] == [102.7, 100.1, 126.8]
    assert rows["wake-ups per day"] == [0.5, 0.5, 25.1]
    assert rows["nodes per wake-up"] == [26.9, 27.1, 3.0]
    assert rows["node utilisation"] == ["69.0 % -> 91.2 %", "69.0 % -> 90.4 %", "69.0 % -> 98.8 %"]
    assert rows["forecast SMAPE (%)"] == [4.8, 5.29, None]


@pytest.mark.slow
def test_fidelity_table_matches_the_reference_run(shared):
    result = run_reproduction(REPRODUCTIONS["helios-fidelity"], shared)
    rows = _rows(result)
    # jobs, JCT ref, ours, queue ref, ours, queued ref, ours, preemptions ref, ours, starts equal
    assert rows["SJF"] == [68503, 11543.43, 11543.43, 62.75, 62.75, 881, 881, 0, 0, "68,503 of 68,503"]
    assert rows["SRTF"][7:] == [801, 801, "68,503 of 68,503"]
    assert rows["FIFO"][1:3] == [11585.29, 11585.59] and rows["FIFO"][9] == "68,279 of 68,503"
    assert rows["QSSF (prio. file)"][9] == "68,481 of 68,503"


def test_builtin_qssf_table_shows_every_policys_job_groups() -> None:
    # SRTF's groups showed '–' though the README quotes 215 / 4,594 / 88,712 s
    from dlsched.reproduce.base import NA
    from dlsched.reproduce.helios_qssf_builtin import group_split

    srtf = {"groups": {"short": {"jobs": 9000, "avg_jct": 215.2}, "middle": {"jobs": 8000, "avg_jct": 4594.0},
                       "long": {"jobs": 3000, "avg_jct": 88712.4}}}
    assert group_split(srtf) == "215 / 4,594 / 88,712"
    assert group_split({"groups": {"short": {"jobs": 0, "avg_jct": 0.0}}}) == NA and group_split({}) == NA
