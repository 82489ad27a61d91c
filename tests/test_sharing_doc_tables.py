"""The sharing tables of docs/sharing-policies.md are generated (scripts/sharing_tables.py) and current."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from dlsched.reproduce.base import Table

REPO = Path(__file__).resolve().parents[1]
spec = importlib.util.spec_from_file_location("sharing_tables_script", REPO / "scripts" / "sharing_tables.py")
script = importlib.util.module_from_spec(spec)
spec.loader.exec_module(script)


def test_markdown_rendering_on_fixed_cells():
    t = Table("truth builtin: 2 seeds", ["policy", "gain (%)", "95 % CI (%)", "seeds won"],
              [["FIFO", None, None, None], ["Horus", 8.7, "1.9 .. 15.4", 9]], note="a note")
    assert script.markdown(t).splitlines() == [
        "*truth builtin: 2 seeds*", "", "| policy | gain (%) | 95 % CI (%) | seeds won |", "|---|---|---|---|",
        "| FIFO | – | – | – |", "| Horus | 8.7 | 1.9 .. 15.4 | 9 |", "", "a note"]


def test_replace_only_touches_its_block():
    text = "a\n<!-- sharing-tables:x -->\nold\n<!-- /sharing-tables:x -->\nb\n"
    assert script.replace(text, "x", "new") == "a\n<!-- sharing-tables:x -->\nnew\n<!-- /sharing-tables:x -->\nb\n"
    with pytest.raises(SystemExit):
        script.replace(text, "y", "new")


def test_every_block_is_in_the_doc():
    doc = script.DOC.read_text()
    for name in script.BLOCKS:
        assert f"<!-- sharing-tables:{name} -->" in doc and f"<!-- /sharing-tables:{name} -->" in doc


def test_the_coscheml_block_is_current():
    assert script.main(["--check", "--only", "coscheml"]) == 0
