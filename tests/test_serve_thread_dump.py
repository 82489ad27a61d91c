"""`dlsched serve` registers a thread dump on SIGUSR1 (faulthandler): an operator, or a test whose
wait for a replica ran out, sees every thread's stack in the service's stderr."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

SCRIPT = """
import os, signal, threading, time
from dlsched.cli.serve_cmd import _thread_dump_on_sigusr1
_thread_dump_on_sigusr1()
def stuck_worker():
    time.sleep(30)
threading.Thread(target=stuck_worker, name="stuck", daemon=True).start()
time.sleep(0.2)
os.kill(os.getpid(), signal.SIGUSR1)
time.sleep(0.2)
print("still running")
"""


@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="POSIX signals only")
def test_sigusr1_dumps_every_thread_and_the_process_runs_on():
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    res = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, env=env, timeout=60)
    assert res.returncode == 0 and res.stdout.strip() == "still running", res.stderr
    assert "stuck_worker" in res.stderr and "most recent call first" in res.stderr
    assert "Current thread 0x" in res.stderr and res.stderr.count("hread 0x") >= 2   # the main one and the stuck one
