"""benchmarks/bench_backfill.py measures what it says: the head cannot start (FIFO starts nothing),
greedy backfill starts every other job, EASY keeps the head's reservation (starts no more than
greedy), all in one run through the kernel's dispatcher."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_one_pass_of_each_variant_over_the_same_queue():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_backfill.py"), "--nodes", "40",
                          "--waiting", "60", "--rounds", "1"], capture_output=True, text=True, check=True,
                         timeout=120).stdout
    lines = out.splitlines()
    assert lines[0].startswith("one pass, 60 waiting jobs (the head needs 16 GPUs) on 40 nodes")
    started = {m.group(1): int(m.group(2)) for m in re.finditer(r"^\s+(\S+)\s+best .*\((\d+) jobs started\)", out, re.M)}
    assert started["fifo"] == 0 and started["fifo+greedy"] == 59
    assert 0 < started["easy"] <= 59 and started["conservative"] <= 59
    assert lines[-2].startswith("  easy / fifo+greedy (best):")
