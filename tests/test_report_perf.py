"""A report over three policies of 70k jobs each stays small: its plots are downsampled.

How long it takes is measured by ``benchmarks/bench_report.py`` (a timed unit test fails on a
loaded machine without telling anything about the code).
"""

from support.report_fixtures import write_comparison

from dlsched.report import build_report


def test_three_policies_of_70k_jobs_give_a_small_report(tmp_path):
    write_comparison(tmp_path, n=70_000)
    path = build_report(tmp_path)
    assert path.stat().st_size < 2_000_000  # downsampled: small PNGs
    assert path.read_text(encoding="utf-8").count("<img") >= 3
