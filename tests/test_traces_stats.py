"""trace_stats on a fixture with hand-computed values."""

from __future__ import annotations

from pathlib import Path

import pytest

from dlsched.traces import load_trace
from dlsched.traces.stats import trace_stats

TR = Path(__file__).parent / "fixtures" / "traces"


def test_stats_exact_values():
    s = trace_stats(load_trace(TR / "helios_cluster_log.csv"), {"vcA": 2, "vcB": 2, "vcC": 1})
    assert (s["jobs"], s["gpu_jobs"], s["cpu_jobs"]) == (5, 5, 0)
    assert s["duration"]["percentiles"]["p50"] == 200.0
    assert s["duration"]["max"] == 7200.0
    assert s["duration"]["cdf"]["1000"] == pytest.approx(0.6)
    groups = {k: v["jobs"] for k, v in s["groups"].items()}
    assert groups == {"short (<15 min)": 3, "middle (15 min-6 h)": 2, "long (>6 h)": 0}
    assert {k: v["jobs"] for k, v in s["gpus"]["mix"].items()} == {"1": 1, "2": 1, "8": 2, "16": 1}
    assert s["gpus"]["single_gpu_share"] == pytest.approx(0.2)
    gpu_time = 8 * 120 + 2 * 10 + 8 * 3600 + 16 * 7200 + 1 * 200
    assert s["gpu_time_gpu_hours"] == pytest.approx(gpu_time / 3600)
    assert s["gpus"]["ge8_gpu_time_share"] == pytest.approx((8 * 120 + 8 * 3600 + 16 * 7200) / gpu_time)
    assert s["arrivals"]["per_hour"][0] == 5 and sum(s["arrivals"]["per_hour"]) == 5
    assert s["arrivals"]["per_weekday"] == [0, 4, 1, 0, 0, 0, 0]  # 2020-09-01 was a Tuesday
    assert s["vcs"]["vcA"]["jobs"] == 3 and s["vcs"]["vcB"]["mean_gpus"] == 16.0
    assert s["status"]["COMPLETED"]["jobs"] == 3
    assert s["offered_load"] == pytest.approx(gpu_time / (5 * 8 * 86395))


def test_stats_relative_trace_without_origin(tmp_path):
    p = tmp_path / "c.csv"
    p.write_text("job_id,vc,gpus,submit_time,duration\na,v,1,3600,5\nb,v,0,7300,5\n")
    s = trace_stats(load_trace(p, include_cpu_jobs=True))
    assert s["cpu_jobs"] == 1 and s["arrivals"]["wall_clock"] is False
    assert s["arrivals"]["per_hour"][1] == 1 and s["arrivals"]["per_hour"][2] == 1
    assert "per_weekday" not in s["arrivals"]
