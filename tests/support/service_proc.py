"""Start ``dlsched serve`` as a child process (so a test can kill -9 it) and talk to it."""

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


class ServiceProcess:
    def __init__(self, port: int, api_url: str, api_token: str, db: str, policy: str, log: Path,
                 token: str = "operator-token", extra: tuple[str, ...] = ()) -> None:
        self.port, self.token, self.log_path = port, token, log
        self.argv = [sys.executable, "-m", "dlsched.cli.main", "serve", "--policy", policy,
                     "--api-server", api_url, "--api-token", api_token, "--insecure-skip-tls-verify",
                     "--db", db, "--port", str(port), "--token", token, *extra]
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 60.0) -> ServiceProcess:
        env = dict(os.environ, PYTHONPATH=str(REPO / "src"), OMP_NUM_THREADS="1")
        out = open(self.log_path, "ab")  # noqa: SIM115 - the child keeps it open
        self.proc = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"dlsched serve exited {self.proc.returncode}:\n{self.log()}")
            try:
                if self.get("/healthz") == {"ok": True}:
                    return self
            except (OSError, urllib.error.URLError):
                pass
            time.sleep(0.2)
        raise RuntimeError(f"dlsched serve not ready after {timeout} s:\n{self.log()}")

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

    def decisions(self) -> list[dict]:
        out, after = [], 0
        while True:
            page = self.get(f"/api/v1/decisions?limit=10000&after={after}")
            if not page:
                return out
            out += page
            after = page[-1]["id"]
