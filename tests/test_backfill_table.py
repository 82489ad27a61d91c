"""docs/backfill.md's experiment tables are what the kept numbers give: the script's ``--check``
passes, and fails on a stale copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "backfill_table.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_tables_are_up_to_date():
    result = _run("--check")
    assert result.returncode == 0, result.stderr
    text = (ROOT / "docs" / "backfill.md").read_text(encoding="utf-8")
    assert "| easy-pred+corr |" in text and "| conservative-truth - easy-truth |" in text


def test_check_fails_on_a_stale_table_and_write_fixes_it(tmp_path):
    stale = tmp_path / "backfill.md"
    text = (ROOT / "docs" / "backfill.md").read_text(encoding="utf-8")
    stale.write_text(text.replace("| fifo+greedy |", "| fifo+greedy (old) |", 1))
    result = _run("--check", "--doc", str(stale))
    assert result.returncode == 1 and "is out of date" in result.stderr
    assert _run("--write", "--doc", str(stale)).returncode == 0
    assert _run("--check", "--doc", str(stale)).returncode == 0
    assert stale.read_text(encoding="utf-8") == text
