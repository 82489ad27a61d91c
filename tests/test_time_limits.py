"""Time limits: the canonical trace's ``time_limit`` column and the ``--time-limits`` draw."""

from __future__ import annotations

import subprocess
import sys

import pytest

from dlsched.core.job import Job
from dlsched.traces.api import load_trace
from dlsched.traces.canonical import write_canonical
from dlsched.traces.time_limits import apply_time_limits, note, parse_time_limits


def _jobs(durations: list[float]) -> list[Job]:
    return [Job(f"j{i}", "v", 1, float(i), d) for i, d in enumerate(durations)]


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_the_column_round_trips_and_an_empty_cell_is_no_limit(tmp_path, suffix):
    src = tmp_path / "t.csv"
    src.write_text("job_id,vc,gpus,submit_time,duration,time_limit\na,v,1,0,10,3600\nb,v,2,5,20,\n")
    trace = load_trace(src)
    assert [(j.job_id, j.time_limit_s) for j in trace.jobs] == [("a", 3600.0), ("b", None)]
    out = write_canonical(trace, tmp_path / f"o{suffix}")
    again = load_trace(out)
    assert [(j.job_id, j.time_limit_s) for j in again.jobs] == [("a", 3600.0), ("b", None)]


def test_a_trace_without_limits_is_written_without_the_column(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("job_id,vc,gpus,submit_time,duration\na,v,1,0,10\n")
    out = write_canonical(load_trace(src), tmp_path / "o.csv")
    assert "time_limit" not in out.read_text().splitlines()[0]


def test_a_zero_limit_is_refused_with_its_line(tmp_path):
    src = tmp_path / "t.csv"
    src.write_text("job_id,vc,gpus,submit_time,duration,time_limit\na,v,1,0,10,0\n")
    with pytest.raises(ValueError, match=r"line 2, column 'time_limit': not positive"):
        load_trace(src)


def test_limits_are_the_duration_times_the_factor_rounded_up():
    jobs = _jobs([100.0, 3600.0, 5000.0, 0.0])
    spec = parse_time_limits("overestimate=2,round=3600")
    counts = apply_time_limits(jobs, spec, seed=0)
    # 200 -> 3600; 7200 -> 7200 (already a multiple); 10000 -> 10800; 0 -> at least one step
    assert [j.time_limit_s for j in jobs] == [3600.0, 7200.0, 10800.0, 3600.0]
    assert (counts.given, counts.kept, counts.without) == (4, 0, 0)


def test_a_job_with_its_own_limit_keeps_it_and_the_note_counts_it():
    jobs = _jobs([100.0, 200.0, 300.0])
    jobs[1].time_limit_s = 50.0
    spec = parse_time_limits("overestimate=1,round=60")
    counts = apply_time_limits(jobs, spec, seed=0)
    assert [j.time_limit_s for j in jobs] == [120.0, 50.0, 300.0]
    assert note(counts, spec) == ("note: --time-limits gave 2 of 3 jobs a limit (true duration x 1, rounded up "
                                  "to 60 s); 1 kept the trace's own")


def test_drawn_factors_and_shares_are_seeded_and_in_range():
    durations = [float(100 + 37 * i) for i in range(400)]
    spec = parse_time_limits("overestimate=1.5:4,round=1,share=0.5")
    first, second, other = _jobs(durations), _jobs(durations), _jobs(durations)
    a = apply_time_limits(first, spec, seed=3)
    apply_time_limits(second, spec, seed=3)
    apply_time_limits(other, spec, seed=4)
    assert [j.time_limit_s for j in first] == [j.time_limit_s for j in second]
    assert [j.time_limit_s for j in first] != [j.time_limit_s for j in other]
    assert a.given + a.without == 400 and 150 < a.given < 250   # about half
    for job, d in zip(first, durations):
        if job.time_limit_s is not None:
            assert 1.5 * d - 1 <= job.time_limit_s <= 4 * d + 1


@pytest.mark.parametrize("text, wrong", [("overestimate=0.5", "overestimate must be >= 1"),
                                         ("round=0", "round must be > 0"), ("share=2", "share must be in"),
                                         ("factor=2", "not KEY=VALUE"), ("overestimate=x", "must be a number")])
def test_bad_specs_name_what_is_wrong(text, wrong):
    with pytest.raises(ValueError, match=wrong):
        parse_time_limits(text)


def test_the_command_line_prints_the_note_and_refuses_a_bad_spec_in_one_line(tmp_path):
    run = [sys.executable, "-m", "dlsched.cli.main", "simulate", "--jobs", "200", "--out", str(tmp_path / "r")]
    ok = subprocess.run(run + ["--time-limits", "overestimate=2,round=600"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    assert "note: --time-limits gave 200 of 200 jobs a limit" in ok.stdout + ok.stderr
    bad = subprocess.run(run + ["--time-limits", "round=-1"], capture_output=True, text=True)
    assert bad.returncode == 2
    assert bad.stderr.strip().splitlines() == ["error: --time-limits: round must be > 0 seconds, got '-1'"]
