"""benchmarks/bench_policy_scale.py prints, per policy and size, the time per job beside FIFO's
from the same run, and refuses bad sizes and unknown policies with one error line (exit 2)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = str(ROOT / "benchmarks" / "bench_policy_scale.py")


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, BENCH, *args], capture_output=True, text=True, timeout=300, check=False)


def test_a_small_run_prints_every_policy_beside_fifo():
    out = _run("--jobs", "300,600", "--nodes", "10", "--base-jobs", "300", "--policies", "srtf,las", "--general")
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert any(line.startswith("jobs sweep on 100 nodes") for line in lines)
    assert any(line.startswith("nodes sweep with 300 jobs") for line in lines)
    rows = [line.split() for line in lines if line.strip().startswith(("fifo", "srtf", "las"))]
    names = [" ".join(r[:2]) if r[1] == "(general)" else r[0] for r in rows]
    assert names == ["fifo", "srtf", "las", "srtf (general)"] * 2
    fifo = next(line for line in lines if line.strip().startswith("fifo"))
    assert fifo.count("(1.0x)") == 2  # FIFO beside itself at both sizes
    cells = re.findall(r"([\d,.]+) \(([\d.]+)x\)", "\n".join(lines))
    assert len(cells) == 2 * 4 + 1 * 4 and all(float(us.replace(",", "")) > 0 for us, _ in cells)


def test_bad_options_get_one_error_line():
    bad = _run("--jobs", "10,x")
    assert bad.returncode == 2 and bad.stderr.strip().splitlines() == [
        "error: --jobs takes comma-separated whole numbers, got '10,x'"]
    unknown = _run("--policies", "fifo,nope", "--jobs", "100", "--nodes", "")
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: --policies: unknown policy 'nope'")
    assert "Traceback" not in bad.stderr + unknown.stderr


def test_the_work_line_weighs_the_timeline_by_time():
    """Hand-checked: pending 2 for 10 s then 4 for 20 s is 3.33 on average (not 2 of the 3 samples'
    mean), running 1 then 3 is 2.33; preemptions 0 + 1 + 2 over 3 jobs is 1.00 a job."""
    import types

    import numpy as np

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_policy_scale

    arrays = {"time": np.array([0.0, 10.0, 30.0]), "queued_jobs": np.array([2, 4, 0]),
              "running_jobs": np.array([1, 3, 5])}
    result = types.SimpleNamespace(metrics=types.SimpleNamespace(timeline_arrays=lambda: arrays))
    jobs = [types.SimpleNamespace(preemptions=k) for k in (0, 1, 2)]
    assert bench_policy_scale.work_line(result, jobs) == (
        "mean 3.3 pending and 2.3 running jobs over 0.0 days, 1.00 preemptions per job")
    arrays["time"] = np.array([5.0])
    assert bench_policy_scale.work_line(result, jobs) == "timeline too short to weigh"
