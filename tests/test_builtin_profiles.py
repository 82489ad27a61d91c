"""The shipped profile table is what scripts/build_builtin_profiles.py derives from Gavel, and it
keeps its attribution."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dlsched.models.colocation_table import BUILTIN_PATH, ColocationTable

REPO = Path(__file__).resolve().parents[1]


def test_the_shipped_table_is_reproducible_from_gavel(shared, tmp_path):
    # everything but the memory column comes from Gavel; the memory estimates are frozen truth (the
    # predictor that made them has since been refitted, issue 24, and a truth must not follow it)
    out = tmp_path / "t.json"
    subprocess.run([sys.executable, str(REPO / "scripts/build_builtin_profiles.py"),
                    "--gavel", str(shared / "profiles/gavel"), "--out", str(out),
                    "--memory-from", str(BUILTIN_PATH)], check=True,
                   capture_output=True, env={**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": "1"})
    assert json.loads(out.read_text()) == json.loads(BUILTIN_PATH.read_text())


def test_derivation_rules_hold_in_the_shipped_table():
    data = json.loads(BUILTIN_PATH.read_text())
    assert "MIT" in data["license"] and (BUILTIN_PATH.parent / "NOTICE.md").is_file()
    assert "Stanford Future Data Systems" in (BUILTIN_PATH.parent / "NOTICE.md").read_text()
    for t in data["job_types"]:
        assert set(t["gpu_util"]) == {"K80", "P100", "V100"}
        assert all(1.0 <= u <= 100.0 for u in t["gpu_util"].values()) and t["gpu_mem_mib"] > 0
    for rows in data["pairs"].values():
        assert all(i <= j and s_i >= 1.0 and s_j >= 1.0 for i, j, s_i, s_j in rows)
    table = ColocationTable.from_json(BUILTIN_PATH)
    assert table.default_gpu == "V100"


def test_a_broken_table_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"job_types": []')
    with pytest.raises(ValueError, match="not a profile set"):
        ColocationTable.from_json(bad)
    with pytest.raises(ValueError, match="profile set not found"):
        ColocationTable.from_json(tmp_path / "missing.json")
