"""A throw-away PostgreSQL server (Debian's ``postgresql`` package) on a free loopback port.

initdb and postgres refuse to run as root, so under root they run as ``nobody`` in a temporary
directory it owns. Stopped by PID (SIGINT = fast shutdown).
"""

from __future__ import annotations

import glob
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from support.control_plane import free_port


def pg_bindir() -> Path | None:
    for cand in [shutil.which("pg_ctl"), *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), reverse=True)]:
        if cand:
            path = Path(os.path.realpath(cand)).parent
            if (path / "initdb").exists() and (path / "postgres").exists():
                return path
    return None


class Postgres:
    def __init__(self) -> None:
        self.bindir = pg_bindir()
        if self.bindir is None:
            raise FileNotFoundError("PostgreSQL is not installed (apt-get install -y postgresql)")
        self.dir = Path(tempfile.mkdtemp(prefix="dlsched-pg-"))
        self.port = free_port()
        self.proc: subprocess.Popen | None = None
        self.user = "nobody" if os.geteuid() == 0 else None

    @property
    def url(self) -> str:
        return f"postgresql+psycopg://dlsched@127.0.0.1:{self.port}/postgres"

    def start(self) -> Postgres:
        data = self.dir / "data"
        if self.user:
            shutil.chown(self.dir, self.user)
            os.chmod(self.dir, 0o700)
        subprocess.run([str(self.bindir / "initdb"), "-D", str(data), "-U", "dlsched", "--auth=trust", "-E", "UTF8"],
                       check=True, capture_output=True, user=self.user, cwd=self.dir)
        log = open(self.dir / "postgres.log", "wb")  # noqa: SIM115 - the child keeps it open
        self.proc = subprocess.Popen([str(self.bindir / "postgres"), "-D", str(data), "-p", str(self.port),
                                      "-h", "127.0.0.1", "-k", str(self.dir), "-c", "fsync=on"],
                                     stdout=log, stderr=subprocess.STDOUT, user=self.user, cwd=self.dir)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError((self.dir / "postgres.log").read_text(errors="replace")[-2000:])
            ok = subprocess.run([str(self.bindir / "pg_isready"), "-h", "127.0.0.1", "-p", str(self.port)],
                                capture_output=True)
            if ok.returncode == 0:
                return self
            time.sleep(0.2)
        raise RuntimeError("PostgreSQL did not become ready in 30 s")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGINT)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                os.kill(self.proc.pid, signal.SIGKILL)
                self.proc.wait(5)
        shutil.rmtree(self.dir, ignore_errors=True)
