"""The canonical format: exact CSV / Parquet round trips, origin kept, relative-time windows."""

from __future__ import annotations

import math
from datetime import datetime
from pathlib import Path

import pytest

from dlsched.core.truth import field, set_measured
from dlsched.traces import CANONICAL_COLUMNS, TraceError, detect_format, load_trace, write_canonical

TR = Path(__file__).parent / "fixtures" / "traces"


def facts(trace):
    return [tuple(field(c)(j) for c in CANONICAL_COLUMNS) for j in trace.jobs]


def same(a, b) -> bool:
    return all((x == y) or (isinstance(x, float) and math.isnan(x) and math.isnan(y))
               for ra, rb in zip(a, b) for x, y in zip(ra, rb)) and len(a) == len(b)


@pytest.mark.parametrize("suffix", [".csv", ".csv.gz", ".parquet"])
def test_round_trip(tmp_path, suffix):
    t = load_trace(TR / "helios_cluster_log.csv")
    t.jobs[0].model_name, t.jobs[0].batch_size = "resnet50", 64
    set_measured(t.jobs[0], gpu_util=87.5)
    out = write_canonical(t, tmp_path / f"t{suffix}")
    assert detect_format(out) == "dlsched"
    back = load_trace(out)
    assert back.origin == t.origin == datetime(2020, 9, 1, 0, 0, 5)
    assert same(facts(back), facts(t))
    assert back.jobs[0].model_name == "resnet50" and back.jobs[0].batch_size == 64


def test_csv_is_plain_with_the_origin_beside_it_and_no_origin(tmp_path):
    import csv
    import json

    t = load_trace(TR / "pollux.csv")
    out = write_canonical(t, tmp_path / "p.csv")
    with open(out, newline="") as fh:  # a plain CSV reader: header first, one row per job
        rows = list(csv.DictReader(fh))
    assert len(rows) == len(t.jobs) and rows[0]["job_id"] == t.jobs[0].job_id
    assert json.loads((tmp_path / "p.csv.meta.json").read_text()) == {"format": "dlsched",
                                                                        "origin": "2017-09-29T07:58:32"}
    assert load_trace(out).origin == t.origin
    t.origin = None
    write_canonical(t, tmp_path / "p.csv")  # rewritten without an origin: the old side file goes
    assert not (tmp_path / "p.csv.meta.json").exists() and load_trace(tmp_path / "p.csv").origin is None


def test_old_csv_with_an_origin_comment_is_still_read(tmp_path):
    old = tmp_path / "old.csv"
    old.write_text("# origin=2020-01-01T00:00:00\njob_id,vc,gpus,submit_time,duration\na,v,1,60,5\n")
    t = load_trace(old)
    assert t.origin == datetime(2020, 1, 1) and t.jobs[0].submit_time == 60.0


def test_canonical_window_by_date_uses_stored_origin(tmp_path):
    out = write_canonical(load_trace(TR / "pollux.csv"), tmp_path / "p.parquet")
    t = load_trace(out, start="2017-10-09 00:00:00")
    assert [j.job_id for j in t.jobs] == ["sia_000001", "sia_000003", "sia_000000"]
    assert t.jobs[0].submit_time == 857671.0  # stored origin kept, not re-based
    r = load_trace(out, origin="2017-10-09 06:13:03")
    assert r.jobs[1].submit_time == 0.0 and r.origin == datetime(2017, 10, 9, 6, 13, 3)


def test_canonical_errors(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("# origin=2020-01-01T00:00:00\njob_id,vc,gpus,submit_time,duration\na,v,1,0,5\nb,v,x,1,5\n")
    with pytest.raises(TraceError, match=r"c.csv, line 4, column 'gpus': not an integer: 'x'"):
        load_trace(p)
    p.write_text("job_id,vc,submit_time,duration\na,v,0,5\n")
    with pytest.raises(TraceError, match="line 1, column 'gpus': missing column"):
        load_trace(p, "dlsched")
    with pytest.raises(TraceError, match="must end in"):
        write_canonical(load_trace(TR / "pollux.csv"), tmp_path / "x.txt")
