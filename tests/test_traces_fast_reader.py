"""The pyarrow fast path of the trace reader gives exactly what the all-text pandas reader gives.

Every case loads the same file twice -- as it comes, and with the fast reader switched off -- and
compares the jobs, origin and load report, or the error message. Clean files must really take the
fast path; anything unusual (quotes, padding, blank lines, bad cells) must fall back.
"""

from __future__ import annotations

import gzip
import math
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from dlsched.core.truth import field
from dlsched.traces import TraceError, _table, load_trace, load_vc_config, write_canonical
from dlsched.traces.pipeline import to_timestamp

FIX = Path(__file__).parent / "fixtures"
TR = FIX / "traces"
FIELDS = ("index", "job_id", "vc", "gpus", "submit_time", "duration", "user", "name", "cpus", "status",
          "model_name", "batch_size", "onnx_ref", "gpu_util", "gpu_mem_mib")

HELIOS_LOG = TR / "helios_log.csv"
HELIOS = TR / "helios_cluster_log.csv"


def _facts(trace) -> tuple:
    def same(v):  # NaN == NaN for the comparison
        return "nan" if isinstance(v, float) and math.isnan(v) else (type(v).__name__, v)
    return ([tuple(same(field(f)(j)) for f in FIELDS) for j in trace.jobs], trace.origin,
            trace.report.as_dict())


def _outcome(call):
    try:
        return ("ok", _facts(call()))
    except TraceError as exc:
        return ("error", str(exc))


def _both(monkeypatch, call) -> tuple:
    """(fast-path outcome, all-text outcome, whether the fast path parsed the file)."""
    used = []
    real = _table._read_arrow

    def spy(*args, **kwargs):
        table = real(*args, **kwargs)
        used.append(table is not None)
        return table

    monkeypatch.setattr(_table, "_read_arrow", spy)
    fast = _outcome(call)
    monkeypatch.setattr(_table, "_read_arrow", lambda *a, **k: None)
    slow = _outcome(call)
    monkeypatch.setattr(_table, "_read_arrow", real)
    return fast, slow, any(used)


@pytest.mark.parametrize("path,fmt,kwargs", [
    (HELIOS_LOG, "auto", {}),
    (HELIOS_LOG, "helios-log", {"start": "2017-10-01 00:00:00", "end": "2017-10-01 00:10:00"}),
    (HELIOS, "helios", {}),
    (HELIOS, "helios", {"include_cpu_jobs": True, "vcs": ["vcA", "vcB"]}),
    (TR / "pollux.csv", "auto", {}),
])
def test_clean_fixtures_take_the_fast_path_with_identical_results(monkeypatch, path, fmt, kwargs):
    fast, slow, used = _both(monkeypatch, lambda: load_trace(path, fmt, **kwargs))
    assert fast == slow
    assert fast[0] == "ok" and used


def test_pai_tables_with_bad_rows_same_both_ways(monkeypatch):
    for skip in (False, True):
        fast, slow, _ = _both(monkeypatch, lambda skip=skip: load_trace(FIX / "pai", skip_invalid=skip))
        assert fast == slow


def test_canonical_round_trip_same_both_ways(monkeypatch, tmp_path):
    out = write_canonical(load_trace(HELIOS, "helios"), tmp_path / "c.csv")
    fast, slow, used = _both(monkeypatch, lambda: load_trace(out))
    assert fast == slow and fast[0] == "ok" and used


def _variant(tmp_path: Path, text: str, name: str = "t.csv") -> Path:
    path = tmp_path / name
    if name.endswith(".gz"):
        path.write_bytes(gzip.compress(text.encode("utf-8")))
    else:
        path.write_bytes(text.encode("utf-8"))
    return path


BASE = HELIOS_LOG.read_text()
HEADER, *ROWS = BASE.splitlines()


def _with_row(row: str, at: int = 1) -> str:
    rows = list(ROWS)
    rows[at] = row
    return "\n".join([HEADER, *rows]) + "\n"


# (name, file text, whether the fast reader may take it)
VARIANTS = [
    ("gzip", BASE, True, "t.csv.gz"),
    ("crlf", BASE.replace("\n", "\r\n"), True, None),
    ("iso-T", BASE.replace("2017-10-01 00:00:45", "2017-10-01T00:00:45"), True, None),
    ("float-gpus", BASE.replace(",6214e9,sia_000003,1,", ",6214e9,sia_000003,1.0,"), True, None),
    ("trailing-blank-lines", BASE + "\n\n", True, None),
    ("quoted", BASE.replace("sia_000003", '"sia_000003"'), False, None),
    ("quoted-comma", BASE.replace("sia_000003", '"sia,000003"'), False, None),
    ("padded", BASE.replace(",Pass,", ", Pass,"), False, None),
    ("blank-inside", BASE.replace("\n", "\n\n", 2), False, None),
    ("bom", "\ufeff" + BASE, True, None),  # the BOM is dropped before either reader sees the bytes
    ("all-empty-last-row", BASE + ",,,,,,,,\n", False, None),
    ("bad-gpus", _with_row("unknown,6214e9,sia_x,abc,Pass,2017-10-01 00:00:45,a,b,30"), False, None),
    ("half-gpu", _with_row("unknown,6214e9,sia_x,1.5,Pass,2017-10-01 00:00:45,a,b,30"), True, None),
    ("negative", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,-3"), True, None),
    ("nan-duration", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,nan"), False, None),
    ("inf-duration", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,inf"), False, None),
    ("huge-duration", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,1e999"), False, None),
    ("empty-duration", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,"), True, None),
    ("empty-time", _with_row("unknown,6214e9,sia_x,1,Pass,,a,b,30"), True, None),
    ("bad-time", _with_row("unknown,6214e9,sia_x,1,Pass,2017-13-01 00:00:00,a,b,30"), False, None),
    ("zoned-time", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45+02:00,a,b,30"), False, None),
    ("short-time", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-1 0:0:45,a,b,30"), False, None),
    ("duplicate-id", _with_row("unknown,6214e9,sia_000003,1,Pass,2017-10-01 00:00:45,a,b,30"), True, None),
    ("empty-vc", _with_row("unknown,,sia_x,1,Pass,2017-10-01 00:00:45,a,b,30"), True, None),
    ("short-row", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45"), False, None),
    ("long-row", _with_row("unknown,6214e9,sia_x,1,Pass,2017-10-01 00:00:45,a,b,30,extra"), False, None),
    ("header-only", HEADER + "\n", False, None),
    ("missing-column", BASE.replace("duration", "dur"), None, None),
]


@pytest.mark.parametrize("skip_invalid", [False, True])
@pytest.mark.parametrize("name,text,fast_ok,file_name", VARIANTS, ids=[v[0] for v in VARIANTS])
def test_variants_same_jobs_or_same_error(monkeypatch, tmp_path, name, text, fast_ok, file_name, skip_invalid):
    path = _variant(tmp_path, text, file_name or "t.csv")
    fast, slow, used = _both(monkeypatch, lambda: load_trace(path, "helios-log", skip_invalid=skip_invalid))
    assert fast == slow
    if fast_ok is not None:
        assert used == fast_ok


def test_vc_configs_same_both_ways(monkeypatch, tmp_path):
    for path in (TR / "vc_config.csv", TR / "vc_config_lucid.csv",
                 _variant(tmp_path, "vc,node num\nvcA,8\nvcB,1e1\n"),
                 _variant(tmp_path, "vc,node num\nvcA,8\nvcB,eight\n", "bad.csv")):
        outcomes = []
        for reader in (_table._read_arrow, lambda *a, **k: None):
            monkeypatch.setattr(_table, "_read_arrow", reader)
            try:
                outcomes.append(load_vc_config(path))
            except TraceError as exc:
                outcomes.append(str(exc))
        assert outcomes[0] == outcomes[1], path


def test_reference_window_same_both_ways(monkeypatch, shared):
    path = shared / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
    kwargs = {"start": "2017-10-01 00:00:00", "end": "2017-11-30 23:59:00"}
    fast, slow, used = _both(monkeypatch, lambda: load_trace(path, **kwargs))
    assert used and fast == slow and len(fast[1][0]) == 68503


@pytest.mark.parametrize("value", [
    "2017-10-01", "2017-10-01 00:00:00", "2017-10-01T07:05", "2017-10-01 07:05:09.25",
    "2017-10-01 00:00:00+02:00", "2017-10-01T00:00:00Z", "Oct 1 2017", "2017-10-01 00:00:00.123456789",
    datetime(2017, 10, 1, 3), datetime(2017, 10, 1, 3, tzinfo=UTC),
    pd.Timestamp("2017-10-01 00:00:00.000000001"), np.datetime64("2017-10-01T01:02:03"),
])
def test_to_timestamp_matches_pandas(value):
    ts = pd.Timestamp(value)
    expected = (ts.tz_convert(None) if ts.tzinfo is not None else ts).to_datetime64().astype("datetime64[ns]")
    assert to_timestamp(value, "f", "start") == expected


@pytest.mark.parametrize("value", ["2017-02-30", "2017-02-30 00:00:00", "yesterday-ish", ""])
def test_to_timestamp_refusals_name_the_value(value):
    with pytest.raises(TraceError, match="is not a date/time"):
        to_timestamp(value, "f", "start")


def test_loading_a_clean_trace_does_not_import_pandas():
    code = (
        "import sys\n"
        "from dlsched.traces.api import load_trace\n"
        "from dlsched.traces.vc import load_vc_config\n"
        f"vcs = load_vc_config({str(TR / 'vc_config.csv')!r})\n"
        f"t = load_trace({str(HELIOS_LOG)!r}, start='2017-10-01 00:00:00', end='2017-12-01', vcs=list(vcs))\n"
        "assert len(t.jobs) > 0\n"
        "print('pandas' in sys.modules)\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert res.stdout.strip() == "False"
