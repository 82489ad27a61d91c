"""The live progress line: drawn on a terminal only, erased at the end; compare reports every policy."""

from __future__ import annotations

import io
import time

from typer.testing import CliRunner

from dlsched.cli import progress
from dlsched.cli.main import app


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_enabled_only_on_a_terminal() -> None:
    assert progress.enabled(stream=FakeTerminal())
    assert not progress.enabled(stream=io.StringIO())


def test_activity_draws_counts_with_a_rate_and_erases_itself() -> None:
    term = FakeTerminal()
    with progress.Activity("work", True, stream=term, interval=0.01) as live:
        live.update(50, 100)
        time.sleep(0.1)
    text = term.getvalue()
    assert "work  50/100 (" in text and "/s)" in text
    assert text.endswith("\r\x1b[2K")  # the line is gone when the work ends


def test_activity_off_writes_nothing() -> None:
    term = FakeTerminal()
    with progress.Activity("work", False, stream=term, interval=0.01) as live:
        live.update(5, 10)
        time.sleep(0.05)
    assert term.getvalue() == ""


def test_policy_line() -> None:
    assert progress.policy_line({"fifo": (20, 20), "sjf": (5, 20), "qssf": (0, 0)}) == \
        "fifo done | sjf 5/20 | qssf waiting"


def test_compare_reports_every_policys_progress(tmp_path) -> None:
    from dlsched.runner import cluster_for, compare_policies
    from dlsched.traces import synthetic

    trace = synthetic.generate(jobs=200, seed=1)
    cluster = cluster_for(trace.jobs, synthetic.default_cluster(trace))
    seen: list[dict] = []
    compare_policies(trace.jobs, cluster, ["fifo", "sjf"], tmp_path, processes=1, progress=seen.append)
    assert seen and seen[-1] == {"fifo": (200, 200), "sjf": (200, 200)}
    assert any(counts["fifo"] == (200, 200) and counts["sjf"][0] < 200 for counts in seen)


def test_quiet_and_pipes_keep_outputs_clean(tmp_path) -> None:
    # CliRunner's stderr is not a terminal: no progress escape codes in what a script reads
    result = CliRunner().invoke(app, ["--quiet", "compare", "--jobs", "100", "--policies", "fifo,sjf",
                                      "--out", str(tmp_path)])
    assert result.exit_code == 0 and "\x1b[2K" not in result.output


def test_json_on_simulate_compare_demo_and_experiment(tmp_path) -> None:
    import json

    def run(*argv):
        result = CliRunner().invoke(app, [str(a) for a in argv])
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)

    one = run("simulate", "--jobs", "150", "--json", "--out", tmp_path / "s")
    assert one == json.loads((tmp_path / "s" / "summary.json").read_text())
    both = run("compare", "--jobs", "150", "--policies", "fifo,sjf", "--json", "--out", tmp_path / "c")
    assert list(both) == ["fifo", "sjf"] and both["sjf"]["jobs"] == 150
    demo = run("demo", "--jobs", "150", "--json", "--out", tmp_path / "d")
    assert list(demo["policies"]) == ["fifo", "sjf", "srtf", "qssf"] and demo["report"].endswith(".html")
    topo = run("experiment", "topo-prototype", "--json", "--out", tmp_path / "t")
    assert set(topo) >= {"fcfs", "topo-aware-p", "meta"}
