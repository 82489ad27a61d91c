"""Loading a large trace hands the memory its temporaries freed back to the OS (traces/release.py):
the resident set after loading 150,000 jobs is lower with the release than without it, in the
same child process set-up; small traces skip it; reading a file that already ends in one newline
gives the same table as before without copying its bytes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from dlsched.traces import _table, pipeline, release
from dlsched.traces.api import load_trace

ROOT = Path(__file__).resolve().parents[1]

_CHILD = """
import sys
import dlsched.traces.release as release
if sys.argv[2] == "off":
    release.MIN_JOBS = 10**12
from dlsched.traces.api import load_trace
trace = load_trace(sys.argv[1], "helios")
status = dict(line.split(":", 1) for line in open("/proc/self/status"))
print(len(trace.jobs), int(status["VmRSS"].split()[0]))
"""


def _write_trace(path: Path, rows: int) -> None:
    rng = np.random.default_rng(0)
    submit = np.datetime64("2020-01-01T00:00:00") + np.sort(rng.integers(0, 86400 * 60, rows)).astype("timedelta64[s]")
    stamps = np.datetime_as_string(submit, unit="s")
    gpus = rng.choice([1, 2, 4, 8], rows)
    duration = rng.integers(1, 100000, rows)
    with open(path, "w") as fh:
        fh.write("job_id,user,vc,jobname,gpu_num,submit_time,duration\n")
        fh.writelines(f"j{i},u{i % 97},vc{i % 5},name-{i},{g},{s.replace('T', ' ')},{d}\n"
                      for i, (g, s, d) in enumerate(zip(gpus.tolist(), stamps.tolist(), duration.tolist())))


def test_loading_a_large_trace_returns_freed_memory(tmp_path):
    if not sys.platform.startswith("linux"):
        return
    trace = tmp_path / "big.csv"
    _write_trace(trace, 150_000)
    rss = {}
    for mode in ("on", "off"):
        out = subprocess.run([sys.executable, "-c", _CHILD, str(trace), mode], capture_output=True, text=True,
                             timeout=600, check=True, env={"PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"})
        jobs, kib = map(int, out.stdout.split())
        assert jobs == 150_000
        rss[mode] = kib / 1024
    assert rss["on"] < rss["off"] - 25, rss  # measured: 143 against 208 MiB


def test_release_runs_for_large_traces_only(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(release, "MIN_JOBS", 50)
    monkeypatch.setattr(pipeline, "release_freed_memory", lambda n: calls.append(("finish", n)))
    real = release.release_freed_memory
    monkeypatch.setattr("dlsched.traces.api.release_freed_memory", lambda n: (calls.append(("load", n)), real(n)))
    small, big = tmp_path / "small.csv", tmp_path / "big.csv"
    _write_trace(small, 20)
    _write_trace(big, 80)
    assert len(load_trace(big, "helios").jobs) == 80
    assert len(load_trace(small, "helios").jobs) == 20
    assert calls == [("finish", 80), ("load", 80), ("finish", 20), ("load", 20)]


def test_trailing_newlines_are_read_as_before(tmp_path):
    body = "job_id,vc,gpu_num,submit_time,duration\na,v,1,2020-01-01 00:00:00,5\n"
    for ending in ("", "\n", "\r\n", "\n\n\n", "\r\n\r\n"):
        path = tmp_path / "t.csv"
        path.write_bytes((body.rstrip("\n") + ending).encode())
        raw = _table._read_raw(str(path), None)
        assert raw.data == body.encode(), repr(ending)
