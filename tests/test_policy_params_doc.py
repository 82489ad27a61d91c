"""docs/policy-params.md is the registry's policy parameters as they are: the generating script's
``--check`` passes, and fails on a stale copy."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "policy_params_table.py"


def _run(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, env=env, timeout=120)


def test_the_parameter_table_is_up_to_date():
    result = _run("--check")
    assert result.returncode == 0, result.stderr
    text = (ROOT / "docs" / "policy-params.md").read_text(encoding="utf-8")
    assert "| `horus` | `beta` | integer | `15` |" in text
    assert "| `pab` | `t_wait` | number or none | none |" in text
    assert "| `fifo` | -- | | | | declares no parameters |" in text
    assert "| `qssf` | `lam` | number | `0.1` | `--lam`: QSSF: weight of the rolling estimate" in text


def test_check_fails_on_a_stale_table(tmp_path):
    stale = tmp_path / "policy-params.md"
    stale.write_text((ROOT / "docs" / "policy-params.md").read_text(encoding="utf-8").replace("`15`", "`16`"))
    result = _run("--check", "--doc", str(stale))
    assert result.returncode == 1 and "is out of date" in result.stderr
    assert _run("--write", "--doc", str(stale)).returncode == 0
    assert _run("--check", "--doc", str(stale)).returncode == 0
