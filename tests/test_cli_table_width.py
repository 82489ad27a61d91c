"""Issue 25: terminal tables never cut a number, at 80, 100 and 120 columns.

Each command's output is rendered once wide (every cell whole) and then at 80/100/120 columns;
every number of the wide output must appear, whole, in the narrow one.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from rich.table import Table
from typer.testing import CliRunner

from dlsched.cli import common
from dlsched.cli.main import app
from dlsched.cli.tables import FittingConsole, fit_table
from dlsched.reproduce.base import Result
from dlsched.reproduce.base import Table as ReproTable
from dlsched.reproduce.render import print_result

FIXTURES = Path(__file__).parent / "fixtures" / "traces"
NUMBER = re.compile(r"(?<![\w.,])-?\d[\d,]*(?:\.\d+)?%?(?![\w.,]*\d)")
WIDTHS = (80, 100, 120)


def _numbers(text: str, cells_only: bool = False) -> set[str]:
    """Numbers in the text (only on table lines with ``cells_only``: timings elsewhere vary)."""
    lines = [ln for ln in text.splitlines() if not cells_only or "│" in ln or "┃" in ln]
    return set(NUMBER.findall("\n".join(lines)))


def _assert_whole(wide: str, narrow: str, width: int) -> None:
    missing = sorted(n for n in _numbers(wide, cells_only=True) if n not in _numbers(narrow))
    assert not missing, f"cut at {width} columns: {missing[:10]}\n{narrow}"
    assert all(len(line) <= width for line in narrow.splitlines() if "│" in line or "┃" in line), narrow


def _summary_table() -> Table:
    table = Table(title="summary (seconds)")
    table.add_column("policy")
    for col in ("jobs", "avg_jct", "median_jct", "p99_jct", "avg_queue_delay", "queued_jobs", "makespan",
                "gpu_utilization", "preemptions"):
        table.add_column(col, justify="right")
    for name in ("fifo", "qssf"):
        table.add_row(name, "68,123", "11,532.4", "1,234.5", "123,456.7", "9,876.5", "12,345", "6,469,123.0",
                      "0.734", "17")
    return table


def _render(table: Table, width: int) -> str:
    console = FittingConsole(width=width, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
    console.print(table)
    text = console.export_text()
    console.file.close()
    return text


@pytest.mark.parametrize("width", WIDTHS)
def test_summary_table_keeps_every_number(width) -> None:
    wide = _render(_summary_table(), 400)
    _assert_whole(wide, _render(_summary_table(), width), width)
    assert "…" not in _render(_summary_table(), width)


def test_fit_keeps_a_table_that_fits_and_stacks_a_very_narrow_one() -> None:
    table = _summary_table()
    assert fit_table(table, 400) is table
    stacked = _render(_summary_table(), 30)
    for value in ("6,469,123.0", "123,456.7", "68,123"):
        assert value in stacked
    assert stacked.count("makespan") == 2  # one key/value block a row


def _fidelity_result() -> Result:
    """The shape of `reproduce helios-fidelity` (its columns, figures of its size)."""
    cols = ["policy", "jobs", "avg JCT ref (s)", "dlsched", "avg queue ref (s)", "dlsched", "queued ref", "dlsched",
            "preemptions ref", "dlsched", "start times equal"]
    rows = [[name, 68503, 11584.25 + i, 11582.5 + i, 6469.12 + i, 6469.12 + i, 12345 + i, 12346 + i, 1020 * i,
             1020 * i, f"{68_400 + i:,} of 68,503"]
            for i, name in enumerate(["FIFO", "SJF", "SRTF", "QSSF (prio. file)"])]
    return Result("helios-fidelity", "Helios fidelity", "paper", "dlsched reproduce helios-fidelity",
                  [ReproTable("reference run (base VC sizes, 352 nodes, consolidate, --compat helios)", cols, rows)],
                  ["a note"], 1.0)


@pytest.mark.parametrize("width", WIDTHS)
def test_reproduce_tables_keep_every_number(width) -> None:
    def render(w: int) -> str:
        console = FittingConsole(width=w, record=True, file=open("/dev/null", "w"))  # noqa: SIM115
        print_result(_fidelity_result(), console)
        console.file.close()
        return console.export_text()

    _assert_whole(render(400), render(width), width)


def _cli(argv: list[str], width: int, monkeypatch) -> str:
    monkeypatch.setattr(common.out, "_width", width)
    result = CliRunner().invoke(app, argv)
    assert result.exit_code == 0, result.output
    return result.output


@pytest.mark.parametrize("argv", [
    ["compare", "--jobs", "400", "--policies", "fifo,sjf,srtf,qssf", "--out", "{tmp}/run"],
    ["simulate", "--jobs", "300", "--out", "{tmp}/one"],
    ["trace", "stats", str(FIXTURES / "helios_log.csv")],
    ["reproduce", "--list"],
    ["policies"],
], ids=["compare-summary", "simulate", "trace-stats", "reproduce-list", "policies"])
def test_commands_keep_every_number(argv, tmp_path, monkeypatch) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    wide = _cli(argv, 400, monkeypatch)
    for width in WIDTHS:
        _assert_whole(wide, _cli(argv, width, monkeypatch), width)
