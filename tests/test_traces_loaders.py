"""Each trace loader on tiny hand-written fixtures, with exact expected values."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from dlsched.core.truth import duration as true_duration
from dlsched.core.truth import status as true_status
from dlsched.traces import TraceError, detect_format, load_trace, load_vc_config

FIX = Path(__file__).parent / "fixtures"
TR = FIX / "traces"


def rows(trace):
    return [(j.job_id, j.vc, j.gpus, j.submit_time, true_duration(j)) for j in trace.jobs]


def test_helios_cluster_log_gpu_jobs_sorted_stably():
    t = load_trace(TR / "helios_cluster_log.csv", "helios")
    assert rows(t) == [("1003", "vcA", 8, 0.0, 120.0), ("1006", "vcA", 2, 0.0, 10.0),
                       ("1001", "vcA", 8, 5.0, 3600.0), ("1004", "vcB", 16, 295.0, 7200.0),
                       ("1005", "vcC", 1, 86395.0, 200.0)]
    assert t.origin == datetime(2020, 9, 1, 0, 0, 5)
    assert [j.index for j in t.jobs] == [0, 1, 2, 3, 4]
    first = t.jobs[0]
    assert (first.user, first.name, first.cpus, true_status(first)) == ("uA", "train_resnet", 32, "FAILED")
    assert t.report.rows_read == 6 and t.report.filtered == {"CPU-only job (0 GPUs)": 1}


def test_helios_cpu_jobs_and_window():
    t = load_trace(TR / "helios_cluster_log.csv", include_cpu_jobs=True)
    assert len(t) == 6 and "1002" in {j.job_id for j in t.jobs}
    w = load_trace(TR / "helios_cluster_log.csv", start="2020-09-01 00:00:06", end="2020-09-01 00:05:00")
    assert [(j.job_id, j.submit_time) for j in w.jobs] == [("1001", 0.0), ("1004", 290.0)]
    assert w.origin == datetime(2020, 9, 1, 0, 0, 10)
    assert w.report.filtered == {"CPU-only job (0 GPUs)": 1, "outside window (before start)": 2,
                                 "outside window (after end)": 1}


def test_helios_log_reference_conventions():
    vcs = load_vc_config(TR / "vc_config.csv")
    t = load_trace(TR / "helios_log.csv", start="2017-10-01 00:00:00", end=datetime(2017, 11, 30, 23, 59),
                   vcs=vcs)
    # origin = first job >= start that passes the GPU and VC filters (not sia_000002, 0 GPUs)
    assert t.origin == datetime(2017, 10, 1, 0, 0, 45)
    assert rows(t) == [("sia_000003", "6214e9", 1, 0.0, 30.0), ("sia_000005", "103959", 4, 15.0, 600.0),
                       ("sia_000006", "0e4a51", 8, 5270295.0, 60.0)]
    assert t.jobs[0].name == "sia_000003" and t.jobs[0].user == "unknown" and true_status(t.jobs[0]) == "Pass"
    assert t.report.filtered == {"CPU-only job (0 GPUs)": 1, "VC not in config": 1,
                                 "outside window (before start)": 1, "outside window (after end)": 1}
    assert sum(t.report.filtered.values()) + len(t) == t.report.rows_read == 7


def test_philly_pollux_ids_and_trailing_blank_line():
    t = load_trace(TR / "pollux.csv")
    assert rows(t) == [("sia_000002", "6c71a0", 1, 0.0, 860662.0),
                       ("sia_000001", "6214e9", 2, 857671.0, 2951.0),
                       ("sia_000003", "103959", 4, 857671.0, 10.0),
                       ("sia_000000", "11cb48", 1, 860603.0, 66.0)]
    assert t.origin == datetime(2017, 9, 29, 7, 58, 32)
    assert t.report.rows_read == 4 and not t.report.skipped


def test_origin_override_and_seconds_window_rejected_for_wall_clock():
    t = load_trace(TR / "pollux.csv", origin="2017-09-29 07:58:00")
    assert t.jobs[0].submit_time == 32.0
    with pytest.raises(TraceError, match="wall-clock"):
        load_trace(TR / "pollux.csv", start=100)


def test_pai_join_and_invalid_rows():
    with pytest.raises(TraceError) as err:
        load_trace(FIX / "pai")
    assert err.value.line == 9 and err.value.column == "start_time"
    assert "pai_job_table.csv, line 9, column 'start_time'" in str(err.value)
    t = load_trace(FIX / "pai", skip_invalid=True)
    assert [(j.job_id, j.vc, j.gpus, j.cpus, j.submit_time, true_duration(j), true_status(j)) for j in t.jobs] == [
        ("j01", "u1", 1, 6, 0.0, 500.0, "Terminated"), ("j14", "u5", 1, 4, 5.0, 100.0, "Terminated"),
        ("j02", "u1", 1, 14, 10.0, 990.0, "Terminated"), ("j03", "u2", 8, 64, 20.0, 55.0, "Failed"),
        ("j07", "u1", 1, 1, 60.0, 0.0, "Terminated"), ("j13", "u5", 4, 24, 120.0, 88800.0, "Terminated")]
    assert t.origin == datetime(1970, 1, 1, 8, 16, 40)  # Unix seconds read as UTC+8 wall clock
    assert sum(t.report.skipped.values()) == 6
    assert t.report.skipped["pai_task_table.csv inst_num: not an integer"] == 1
    assert t.report.filtered == {"CPU-only job (0 GPUs)": 1, "job not finished (no end_time)": 2,
                                 "task rows of jobs not in the job table": 1}


def test_pai_headerless_and_vc_column(tmp_path):
    for name in ("pai_job_table.csv", "pai_task_table.csv"):
        lines = (FIX / "pai" / name).read_text().splitlines(keepends=True)
        (tmp_path / name).write_text("".join(lines[1:]))
    t = load_trace(tmp_path / "pai_job_table.csv", "pai", skip_invalid=True,
                   format_options={"vc_column": "gpu_type"})
    assert [(j.job_id, j.vc) for j in t.jobs][:3] == [("j01", "V100"), ("j14", "T4"), ("j02", "MISC")]


def test_vc_config_both_layouts_and_validation(tmp_path):
    assert load_vc_config(TR / "vc_config.csv") == {"6214e9": 64, "103959": 8, "0e4a51": 32}
    assert load_vc_config(TR / "vc_config_lucid.csv") == {"vcEwI": 9, "vcWoR": 5}
    bad = tmp_path / "vc.csv"
    bad.write_text("vc,node num\na,4\nb,0\n")
    with pytest.raises(TraceError, match="line 3, column 'node num': node count must be a positive"):
        load_vc_config(bad)
    bad.write_text("vc,node num\na,4\na,2\n")
    with pytest.raises(TraceError, match="line 3.*duplicate VC 'a'"):
        load_vc_config(bad)


@pytest.mark.parametrize("name, fmt", [("helios_cluster_log.csv", "helios"), ("helios_log.csv", "helios-log"),
                                       ("pollux.csv", "philly-pollux")])
def test_auto_detection(name, fmt):
    assert detect_format(TR / name) == fmt
    assert load_trace(TR / name).report.rows_read > 0


def test_auto_detection_pai_and_unknown(tmp_path):
    assert detect_format(FIX / "pai") == "pai"
    assert detect_format(FIX / "pai" / "pai_job_table.csv") == "pai"
    odd = tmp_path / "odd.csv"
    odd.write_text("a,b\n1,2\n")
    with pytest.raises(TraceError, match="known formats: .*helios-log.*philly-pollux"):
        load_trace(odd)
    with pytest.raises(TraceError, match="unknown trace format 'nope'; known formats: auto, dlsched"):
        load_trace(odd, "nope")
    with pytest.raises(TraceError, match="no such file"):
        load_trace(tmp_path / "missing.csv")
