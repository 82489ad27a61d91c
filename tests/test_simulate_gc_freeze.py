"""`dlsched simulate` freezes the heap it built while the results are printed, and thaws it after.

Why: the command pauses the cyclic GC while it loads, simulates and writes; the first collection
after the pause used to walk every job and the whole state (47 ms of the Philly window's 1.8 s
command, measured with ``gc.callbacks``). Those objects live to the end and make no cycles, so
they are frozen instead. A caller in the same process (this test) must get its heap back.
"""

from __future__ import annotations

import gc

from typer.testing import CliRunner

import dlsched.cli.sim_cmd as sim_cmd
from dlsched.cli.main import app


def test_the_heap_is_frozen_while_printing_and_thawed_after(tmp_path, monkeypatch):
    seen: list[tuple[int, bool]] = []
    printing = sim_cmd._print_summaries

    def watched(summaries):
        seen.append((gc.get_freeze_count(), gc.isenabled()))
        printing(summaries)

    monkeypatch.setattr(sim_cmd, "_print_summaries", watched)
    before = gc.get_freeze_count()
    res = CliRunner().invoke(app, ["simulate", "--jobs", "300", "--policy", "fifo", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    [(frozen, enabled)] = seen
    assert frozen > before + 300  # at least the 300 jobs, tracked objects each
    assert enabled  # the pause is over: only the frozen objects are out of the collector's way
    assert gc.get_freeze_count() == 0  # unfreeze thaws everything (nothing else here froze)
    assert (tmp_path / "r" / "jobs.csv").read_text().count("\n") == 301


def test_the_heap_is_thawed_when_printing_fails(tmp_path, monkeypatch):
    def broken(summaries):
        raise RuntimeError("the terminal went away")

    monkeypatch.setattr(sim_cmd, "_print_summaries", broken)
    res = CliRunner().invoke(app, ["simulate", "--jobs", "50", "--policy", "fifo", "--out", str(tmp_path / "r")])
    assert res.exit_code != 0
    assert gc.get_freeze_count() == 0
