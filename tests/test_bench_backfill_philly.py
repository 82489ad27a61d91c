"""benchmarks/bench_backfill_philly.py runs each variant's whole ``dlsched simulate`` on Philly
and prints its CPU time beside FIFO's from the same run (a one-day window here; the shared
folder's reference run is needed)."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLSCHED_SHARED", ROOT.parent / "shared"))
if not (SHARED / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz").is_file():
    SHARED = Path("/work/shared")


def _bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_backfill_philly.py"), *args],
                          capture_output=True, text=True, timeout=600, env={**os.environ, "PYTHONPATH": str(ROOT / "src")})


def test_fifo_and_easy_are_timed_in_the_same_run():
    if not (SHARED / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz").is_file():
        pytest.skip("the Philly reference run is not in the shared folder")
    res = _bench("--shared", str(SHARED), "--rounds", "1", "--variants", "fifo,easy-limit",
                 "--end", "2017-10-02 00:00:00")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].startswith("dlsched simulate on Philly (the window up to 2017-10-02 00:00:00")
    rows = {m.group(1): (float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^\s+(\S+)\s+([\d.]+) s CPU .*\s([\d.]+)x fifo$", res.stdout, re.M)}
    assert set(rows) == {"fifo", "easy-limit"} and rows["fifo"][1] == 1.0
    # The ratio is printed from the unrounded CPU times, the seconds to two decimals: a ratio recomputed from the
    # printed seconds can differ by their rounding (0.005 s each) plus the ratio's own (0.005).
    easy, fifo, ratio = rows["easy-limit"][0], rows["fifo"][0], rows["easy-limit"][1]
    assert easy > 0 and fifo > 0.005
    assert (easy - 0.005) / (fifo + 0.005) - 0.005 <= ratio <= (easy + 0.005) / (fifo - 0.005) + 0.005


def test_a_bad_variant_or_folder_is_one_error_line(tmp_path):
    res = _bench("--variants", "easy,fifo", "--shared", str(tmp_path))
    assert res.returncode == 2 and res.stderr.strip() == (
        "error: --variants: easy (known: fifo, easy-limit, easy-pred, qssf; fifo is the baseline)")
    res = _bench("--shared", str(tmp_path))
    assert res.returncode == 2 and res.stderr.startswith("error: --shared: ") and "Traceback" not in res.stderr
