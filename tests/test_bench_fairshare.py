"""benchmarks/bench_fairshare.py measures what it says: one pass of each policy starts every
waiting job (so the two timings compare the same work), through the kernel's dispatcher."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_a_fair_share_pass_and_a_fifo_pass_start_every_waiting_job():
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_fairshare.py"), "--nodes", "40",
                          "--waiting", "60", "--users", "7", "--rounds", "1"],
                         capture_output=True, text=True, check=True, timeout=120).stdout
    lines = out.splitlines()
    assert lines[0].startswith("one pass, 60 waiting jobs of 7 users on 40 nodes")
    fifo = next(line for line in lines if line.strip().startswith("fifo"))
    fair = next(line for line in lines if line.strip().startswith("fairshare"))
    assert "(60 jobs started)" in fifo and "(60 jobs started)" in fair
    assert "fair share / FIFO (best):" in lines[-1]
