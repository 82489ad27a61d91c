"""benchmarks/bench_service.py removes the temporary store it creates (issue 38 point 5): after a
real (tiny) run and after a run that fails, no ``dlsched-bench-*`` folder is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def test_a_run_leaves_no_temporary_store(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path), "PYTHONPATH": str(ROOT / "src")}
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "bench_service.py"), "--nodes", "8",
                          "--rate", "10", "--seconds", "0.6", "--block", "0.3"],
                         check=False, capture_output=True, text=True, env=env, timeout=180)
    assert out.returncode == 0, out.stderr
    assert "prioritize" in out.stdout  # it measured
    assert not list(tmp_path.glob("dlsched-bench-*"))


def test_a_failed_run_removes_its_store_too(tmp_path, monkeypatch):
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_service
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    monkeypatch.setattr(bench_service.tempfile, "tempdir", str(tmp_path))
    made = []

    def broken(tmp, servers, *args):
        made.append(tmp)
        (Path(tmp) / "bench.db").write_text("x")
        raise RuntimeError("server did not start")

    monkeypatch.setattr(bench_service, "_measure", broken)
    with pytest.raises(RuntimeError, match="did not start"):
        bench_service.run(8, 10.0, 0.5)
    assert made and made[0].startswith(str(tmp_path))
    assert not list(tmp_path.glob("dlsched-bench-*"))
