"""The report stays fast on large comparisons: 3 policies x 70k jobs (210k-row timelines each)."""

from __future__ import annotations

import time

from support.report_fixtures import write_comparison

from dlsched.report import build_report


def test_three_policies_of_70k_jobs_under_3_seconds(tmp_path):
    write_comparison(tmp_path, n=70_000)
    build_report(tmp_path)  # warm imports (matplotlib, fonts) so the timing is the report itself
    start = time.perf_counter()
    path = build_report(tmp_path)
    assert time.perf_counter() - start < 3.0
    assert path.stat().st_size < 2_000_000  # downsampled: small PNGs
