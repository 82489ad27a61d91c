"""Start ``dlsched serve`` (or another HTTP server of ours, :class:`ChildServer`) as a child
process, so that a test can kill -9 it, and talk to it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


class ChildServer:
    """A server on 127.0.0.1:``port`` run as ``argv`` (output appended to ``log``), ready once its
    ``/healthz`` answers ``{"ok": true}``, and stopped by its PID."""

    label = "server"   # how errors name it
    ready_s = 60.0     # how long start waits for /healthz by default

    def __init__(self, port: int, argv: list[str], log: Path) -> None:
        self.port, self.argv, self.log_path = port, argv, log
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float | None = None):
        timeout = self.ready_s if timeout is None else timeout
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it open
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.label} exited {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("/healthz") == {"ok": True}:
                    return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"{self.label} not ready after {timeout} s:\n{self.log()}")

    def kill9(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.kill9()

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")[-4000:] if self.log_path.exists() else ""

    def get(self, path: str):
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return json.loads(resp.read())


class ServiceProcess(ChildServer):
    """``dlsched serve`` against the API server at ``api_url``, with its store at ``db``."""

    label = "dlsched serve"

    def __init__(self, port: int, api_url: str, api_token: str, db: str, policy: str, log: Path,
                 token: str = "operator-token", extra: tuple[str, ...] = ()) -> None:
        super().__init__(port, [sys.executable, "-m", "dlsched.cli.main", "serve", "--policy", policy,
                                "--api-server", api_url, "--api-token", api_token, "--insecure-skip-tls-verify",
                                "--db", db, "--port", str(port), "--token", token, *extra], log)
        self.token = token

    def decisions(self) -> list[dict]:
        out, after = [], 0
        while True:
            page = self.get(f"/api/v1/decisions?limit=10000&after={after}")
            if not page:
                return out
            out += page
            after = page[-1]["id"]
