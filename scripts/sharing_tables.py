#!/usr/bin/env python3
"""Regenerate the sharing tables of docs/sharing-policies.md from the commands that produce them.

The blocks between ``<!-- sharing-tables:NAME -->`` and ``<!-- /sharing-tables:NAME -->`` are
written by this script, so they cannot go stale silently (the README's demo blocks are
``scripts/readme_figures.py``'s):

    python scripts/sharing_tables.py --write                 # every block (Table 7: minutes)
    python scripts/sharing_tables.py --check --only coscheml # exit 1 with a diff when stale

Blocks: ``horus-table6`` (`dlsched reproduce horus-table6`: built-in and Lucid truths, 10 seeds
extended by the seed rule of :mod:`dlsched.experiments.sharing.pairwise`, with every pair of
policies compared), ``coscheml`` and ``colocation-oracle`` (the same), ``horus-table7`` (3 seeds, real and perfect
predictions; needs ../shared) and ``truths`` (:func:`dlsched.experiments.sharing.truths.why_truths_differ`,
10 seeds). ``tests/test_sharing_doc_tables.py`` checks the rendering and one block.
"""

from __future__ import annotations

import argparse
import difflib
import os
import re
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "sharing-policies.md"
BLOCKS = ("horus-table6", "coscheml", "colocation-oracle", "horus-table7", "truths")


def cell(value: object) -> str:
    from dlsched.reproduce.render import text_cell

    return text_cell(value)


def markdown(table) -> str:
    """One reproduction table as markdown, its title as an italic caption."""
    lines = [f"*{table.title}*", "", "| " + " | ".join(table.columns) + " |",
             "|" + "---|" * len(table.columns)]
    lines += ["| " + " | ".join(cell(v) for v in row) + " |" for row in table.rows]
    if table.note:
        lines += ["", table.note]
    return "\n".join(lines)


def truths_table(rows: list[dict]) -> str:
    head = ("| truth | predictions | policy | gain vs FIFO | 95 % CI | seeds won | OOM crashes / run | "
            "rate while sharing | job-hours shared / run |")
    lines = [head, "|" + "---|" * 9]
    for r in rows:
        lines.append(f"| {r['truth']} | {r['predictions']} | {r['policy']} | {100 * r['gain']:+.1f} % | "
                     f"{100 * r['gain_ci_low']:+.1f} .. {100 * r['gain_ci_high']:+.1f} % | {r['wins']:.0f} / "
                     f"{r['seeds']:.0f} | {r['oom']:.1f} | {r['shared_rate']:.3f} | {r['shared_job_hours']:.1f} |")
    return "\n".join(lines)


block_cache: dict[str, str] = {}


def block(name: str) -> str:
    """The generated text of block ``name`` (kept in ``block_cache``)."""
    if name not in block_cache:
        block_cache[name] = _block(name)
    return block_cache[name]


def _block(name: str) -> str:
    sys.path.insert(0, str(REPO / "src"))
    if name == "truths":
        from dlsched.experiments.sharing.truths import why_truths_differ

        return ("`python scripts/sharing_tables.py --write --only truths` (W-Large, 10 seeds):\n\n"
                + truths_table(why_truths_differ(list(range(10)))))
    from dlsched.reproduce.base import default_shared
    from dlsched.reproduce.registry import REPRODUCTIONS
    from dlsched.reproduce.render import run_reproduction

    repro = REPRODUCTIONS[name]
    shared = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared")) if not default_shared().is_dir() \
        else default_shared()
    result = run_reproduction(repro, shared)
    notes = [n for n in result.notes if not n.startswith("computed in")]  # timings vary from run to run
    parts = [f"`dlsched reproduce {name}`:"] + [markdown(t) for t in result.tables]
    parts += [f"* {n}" for n in notes]
    return "\n\n".join(parts)


def replace(text: str, name: str, body: str) -> str:
    pattern = re.compile(rf"(<!-- sharing-tables:{re.escape(name)} -->\n)(?:.*?\n)?(<!-- /sharing-tables:{re.escape(name)} -->)",
                         re.DOTALL)
    if not pattern.search(text):
        raise SystemExit(f"{DOC}: no block sharing-tables:{name}")
    return pattern.sub(lambda m: m.group(1) + body + "\n" + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    mode = ap.add_mutually_exclusive_group(required=True)
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    ap.add_argument("--only", default=",".join(BLOCKS), help="comma-separated blocks")
    args = ap.parse_args(argv)
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in BLOCKS:
            print(f"error: --only: unknown block {n!r}; choose from {', '.join(BLOCKS)}", file=sys.stderr)
            return 2
    text = DOC.read_text()
    new = text
    for n in names:
        new = replace(new, n, block(n))
        if args.write:  # block by block: a long run keeps what it has made
            DOC.write_text(replace(DOC.read_text(), n, block_cache[n]))
    if args.write:
        return 0
    if new != text:
        sys.stdout.writelines(difflib.unified_diff(text.splitlines(True), new.splitlines(True), "docs", "generated"))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
