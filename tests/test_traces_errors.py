"""Invalid rows: messages name file, 1-based line (header = line 1) and column; skip_invalid counts."""

from __future__ import annotations

import pytest

from dlsched.traces import TraceError, load_trace

HEADER = "user,vc,jobname,gpu_num,state,submit_time,start_time,end_time,duration\n"
GOOD = "u,vc1,j{i},1,Pass,2017-10-01 00:00:0{i},x,x,10\n"


def write(tmp_path, body: str, header: str = HEADER):
    path = tmp_path / "log.csv"
    path.write_text(header + body)
    return path


def good(i: int) -> str:
    return GOOD.format(i=i)


def test_missing_column(tmp_path):
    path = write(tmp_path, "u,vc1,j1,Pass,2017-10-01 00:00:00,10\n",
                 header="user,vc,jobname,state,submit_time,duration\n")
    with pytest.raises(TraceError) as err:
        load_trace(path, "helios-log", skip_invalid=True)  # a file-level error cannot be skipped
    assert str(err.value).startswith(f"{path}, line 1, column 'gpu_num': missing column 'gpu_num'")


@pytest.mark.parametrize("bad_row, line, column, reason", [
    ("u,vc1,jx,two,Pass,2017-10-01 00:00:05,x,x,10\n", 3, "gpu_num", "not an integer: 'two'"),
    ("u,vc1,jx,1,Pass,2017-10-01 00:00:05,x,x,-5\n", 3, "duration", "negative value: '-5'"),
    ("u,vc1,jx,1,Pass,2017-13-01 00:00:05,x,x,5\n", 3, "submit_time", "bad timestamp"),
    ("u,vc1,jx,1.5,Pass,2017-10-01 00:00:05,x,x,5\n", 3, "gpu_num", "not an integer: '1.5'"),
    ("u,,jx,1,Pass,2017-10-01 00:00:05,x,x,5\n", 3, "vc", "empty value"),
    ("u,vc1,j1,1,Pass,2017-10-01 00:00:05,x,x,5\n", 3, "jobname", "duplicate job id: 'j1'"),
])
def test_first_invalid_row_named(tmp_path, bad_row, line, column, reason):
    path = write(tmp_path, good(1) + bad_row + good(2))
    with pytest.raises(TraceError) as err:
        load_trace(path)
    assert (err.value.line, err.value.column) == (line, column)
    assert f"{path}, line {line}, column '{column}': {reason}" in str(err.value)


def test_skip_invalid_counts_by_reason(tmp_path):
    body = (good(1) + "u,vc1,ja,two,Pass,2017-10-01 00:00:05,x,x,10\n"
            + "u,vc1,jb,1,Pass,2017-10-01 00:00:05,x,x,-1\n"
            + "u,vc1,jc,three,Pass,2017-10-01 00:00:05,x,x,-1\n"
            + "u,vc1,jd,1,Pass,not a time,x,x,1\n" + good(2))
    path = write(tmp_path, body)
    t = load_trace(path, skip_invalid=True)
    assert [j.job_id for j in t.jobs] == ["j1", "j2"]
    assert t.report.skipped == {"gpu_num: not an integer": 2, "duration: negative value": 1,
                                "submit_time: bad timestamp (want YYYY-MM-DD HH:MM:SS)": 1}
    assert t.report.examples["gpu_num: not an integer"] == "line 3: not an integer: 'two'"
    assert t.report.rows_read == 6
    assert any("skipped 2 invalid rows: gpu_num" in line for line in t.report.lines())


def test_blank_line_inside_is_invalid_but_trailing_is_not(tmp_path):
    path = write(tmp_path, good(1) + "\n" + good(2) + "\n\n")
    with pytest.raises(TraceError, match="line 3"):
        load_trace(path)
    assert len(load_trace(path, skip_invalid=True)) == 2


def test_pollux_gpu_time_mismatch(tmp_path):
    path = tmp_path / "p.csv"
    path.write_text("timestamp,duration,num_gpus,gpu_time,cluster\n"
                    "2017-10-09 07:01:55,66.0,2,132.0,a\n2017-10-09 07:01:56,66.0,2,66.0,a\n")
    with pytest.raises(TraceError, match="line 3, column 'gpu_time': gpu_time != duration"):
        load_trace(path)
    assert load_trace(path, skip_invalid=True).report.skipped == {
        "gpu_time: gpu_time != duration * num_gpus": 1}


def test_window_date_for_relative_trace_needs_origin(tmp_path):
    path = tmp_path / "c.csv"
    path.write_text("job_id,vc,gpus,submit_time,duration\na,v,1,0,5\nb,v,1,100,5\n")
    assert [j.job_id for j in load_trace(path, start=50).jobs] == ["b"]
    with pytest.raises(TraceError, match="relative times and no origin"):
        load_trace(path, start="2020-01-01 00:00:00")
