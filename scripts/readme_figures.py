#!/usr/bin/env python3
"""Regenerate the README's built-in-workload figures from the command that produces them.

The blocks between ``<!-- readme-figures:NAME -->`` and ``<!-- /readme-figures:NAME -->`` in
README.md are written by this script, so they cannot go stale silently:

    python scripts/readme_figures.py --write     # run `dlsched demo`'s comparison, rewrite the blocks
    python scripts/readme_figures.py --check     # exit 1 (with a diff) when a block is out of date
    python scripts/readme_figures.py --check --from runs/demo   # reuse `dlsched demo --out runs/demo`

Blocks: ``demo-table`` (the QSSF table of "QSSF's value where queueing is real": `dlsched demo`,
built-in workload of 20,000 jobs, seed 0, FIFO/SJF/SRTF/QSSF) and ``demo-ratios`` (the ratio line
under it). ``tests/test_readme_figures.py`` runs ``--check`` (and checks the rendering on fixed numbers).
"""

from __future__ import annotations

import argparse
import difflib
import json
import re
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
POLICIES = ("fifo", "sjf", "srtf", "qssf")
LABELS = {"fifo": "FIFO", "sjf": "SJF (oracle)", "srtf": "SRTF (oracle, preemptive)", "qssf": "QSSF (online)"}


def run_demo(out: Path, jobs: int = 20000, seed: int = 0) -> dict[str, dict]:
    """The comparison `dlsched demo` runs (same workload, cluster and policy options), without the report."""
    from dlsched.run import RunConfig, WorkloadConfig
    from dlsched.run.build import build_comparison
    from dlsched.run.params import policy
    from dlsched.runner import compare_policies, load_summary

    configs = [RunConfig(workload=WorkloadConfig(jobs=jobs, seed=seed), policy=policy(p)) for p in POLICIES]
    inputs, cluster, base = build_comparison(configs)
    compare_policies(inputs.jobs, cluster, list(POLICIES), out, base)
    return {n: load_summary(out / n) for n in POLICIES}


def load_demo(folder: Path) -> dict[str, dict]:
    return {n: json.loads((folder / n / "summary.json").read_text()) for n in POLICIES}


def _s(x: float) -> str:
    return f"{x:,.0f}"


def demo_table(s: dict[str, dict]) -> str:
    lines = ["| policy | avg JCT | avg queue delay | queued jobs | short / middle / long avg JCT |",
             "|---|---|---|---|---|"]
    for name in POLICIES:
        r, g = s[name], s[name]["groups"]
        groups = " / ".join(_s(g[k]["avg_jct"]) if g[k].get("jobs") else "–"
                            for k in ("short", "middle", "long"))
        lines.append(f"| {LABELS[name]} | {_s(r['avg_jct'])} s | {_s(r['avg_queue_delay'])} s | "
                     f"{r['queued_jobs']:,} | {groups} s |")
    return "\n".join(lines)


def demo_ratios(s: dict[str, dict]) -> str:
    q, f, j = s["qssf"], s["fifo"], s["sjf"]

    def ratio(a: dict, b: dict, key: str, digits: int) -> str:
        return f"×{a[key] / b[key]:.{digits}f}" if b[key] else "–"

    return (f"QSSF/FIFO: JCT {ratio(q, f, 'avg_jct', 3)}, queue delay {ratio(q, f, 'avg_queue_delay', 3)}, "
            f"queued jobs {ratio(q, f, 'queued_jobs', 2)}; QSSF/SJF: {ratio(q, j, 'avg_jct', 2)}, "
            f"{ratio(q, j, 'avg_queue_delay', 2)}, {ratio(q, j, 'queued_jobs', 2)}")


BLOCKS = {"demo-table": demo_table, "demo-ratios": demo_ratios}


def _pattern(name: str) -> re.Pattern:
    tag = re.escape(name)
    return re.compile(rf"(<!-- readme-figures:{tag} -->\n)(.*?)(\n<!-- /readme-figures:{tag} -->)", re.S)


def render(readme: str, summaries: dict[str, dict]) -> str:
    """``readme`` with every block regenerated; a missing block is an error."""
    for name, make in BLOCKS.items():
        pattern = _pattern(name)
        if not pattern.search(readme):
            raise SystemExit(f"error: README has no block <!-- readme-figures:{name} --> ... "
                             f"<!-- /readme-figures:{name} -->")
        readme = pattern.sub(lambda m: m.group(1) + make(summaries) + m.group(3), readme)
    return readme


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when README.md is out of date")
    mode.add_argument("--write", action="store_true", help="rewrite the blocks in README.md")
    parser.add_argument("--from", dest="source", type=Path, help="a finished `dlsched demo --out DIR`")
    parser.add_argument("--readme", type=Path, default=REPO / "README.md")
    args = parser.parse_args(argv)
    if args.source is not None:
        summaries = load_demo(args.source)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            summaries = run_demo(Path(tmp))
    old = args.readme.read_text()
    new = render(old, summaries)
    if args.write:
        args.readme.write_text(new)
        print(f"wrote {args.readme}")
        return 0
    if new != old:
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                   "README.md", "README.md (regenerated)"))
        print("README figures are out of date: run python scripts/readme_figures.py --write", file=sys.stderr)
        return 1
    print("README figures are current")
    return 0


if __name__ == "__main__":
    sys.exit(main())
