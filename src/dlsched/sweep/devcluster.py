"""A throw-away dask.distributed cluster on 127.0.0.1 for tests and benchmarks.

It runs the real ``dask scheduler`` and ``dask worker`` programs as child processes (single
threaded workers, no nanny, no dashboard) on a free port, and stops exactly those processes, by
PID, when the block ends.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, env: dict) -> subprocess.Popen:
    with open(log, "w") as f:
        return subprocess.Popen([sys.executable, "-m", *args], env=env, stdout=f, stderr=subprocess.STDOUT)


@contextlib.contextmanager
def local_dask_cluster(workers: int = 2, log_dir: str | Path | None = None, timeout_s: float = 120.0,
                       pythonpath: str | None = None) -> Iterator[str]:
    """Yield ``tcp://127.0.0.1:PORT`` of a scheduler with ``workers`` worker processes."""
    from distributed import Client

    logs = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="dlsched-dask-"))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    procs = [_start(["distributed.cli.dask_scheduler", "--host", "127.0.0.1", "--port", str(port),
                     "--no-dashboard"], logs / "scheduler.log", env)]
    try:
        for i in range(workers):
            procs.append(_start(["distributed.cli.dask_worker", address, "--nthreads", "1", "--no-nanny",
                                 "--no-dashboard", "--host", "127.0.0.1", "--name", f"w{i}"],
                                logs / f"worker{i}.log", env))
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                with Client(address, timeout=5, set_as_default=False) as client:
                    client.wait_for_workers(workers, timeout=max(1.0, deadline - time.monotonic()))
                break
            except (OSError, TimeoutError):
                if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
                    tails = " | ".join(f"{p.name}: {p.read_text()[-300:]}" for p in sorted(logs.glob("*.log")))
                    raise RuntimeError(f"the local Dask cluster did not start: {tails}") from None
                time.sleep(0.5)
        yield address
    finally:
        for proc in reversed(procs):
            proc.terminate()
        for proc in reversed(procs):
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
