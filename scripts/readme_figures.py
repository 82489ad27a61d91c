#!/usr/bin/env python3
"""Regenerate the figure tables of README.md and docs/*.md from the commands that produce them.

Every block between ``<!-- readme-figures:NAME -->`` and ``<!-- /readme-figures:NAME -->`` in the
README or a doc is written by this script, so none can go stale silently:

    python scripts/readme_figures.py --write                 # rerun everything, rewrite every block
    python scripts/readme_figures.py --check                 # exit 1 (with a diff) when a block is stale
    python scripts/readme_figures.py --check --only demo-sharing,graph-predict   # some blocks only
    python scripts/readme_figures.py --check --from runs/demo   # reuse `dlsched demo --out runs/demo`
    python scripts/readme_figures.py --list                  # the blocks, their files and their cost

Blocks (``BLOCKS`` below): ``demo-table``/``demo-ratios`` (README: `dlsched demo`'s QSSF table, built-in
workload of 20,000 jobs, seed 0; about a minute), ``demo-sharing`` (README: the GPU-sharing table
`dlsched demo` prints after `make demo`, whose install has no ``graph`` extra; ~10 s),
``demo-sharing-graph`` (README: the same run with the ``graph`` extra, predictions from ONNX
graphs; ~15 s), ``graph-predict`` (docs/graph.md: two `dlsched predict` outputs; needs the graph
extra and the exported zoo) and ``sweep-table`` (docs/sweeps.md: the example sweep's table; ~30 s).
A block whose inputs are missing here (an extra, the zoo cache) is reported as skipped, not
failed. ``tests/test_readme_figures.py`` checks the fast blocks in every run and all in the slow run.
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

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


SHARING_LABELS = ("FIFO, no sharing", "Horus", "Co-scheML", "OBP")


def _python(code: str, *argv: str, timeout: float = 900) -> str:
    """stdout of ``python -c code argv`` on this tree (src first), as a fresh process: an extra can be
    hidden from it (``sys.modules['onnx'] = None``) the way a smaller install lacks it."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True, env=env, check=False,
                          timeout=timeout, cwd=REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(argv) or code[:60]} failed ({done.returncode}): {done.stderr.strip()[-400:]}")
    return done.stdout


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


class Skip(Exception):
    """A block's inputs are missing here (an optional extra, the exported zoo): not checked."""


class Sources:
    """The runs the blocks are made from, each run at most once."""

    def __init__(self, demo_dir: Path | None = None, sweep_dir: Path | None = None) -> None:
        self.demo_dir, self.sweep_dir = demo_dir, sweep_dir
        self._cache: dict[str, object] = {}

    def _once(self, key: str, make: Callable[[], object]) -> object:
        if key not in self._cache:
            self._cache[key] = make()
        return self._cache[key]

    def demo(self) -> dict[str, dict]:
        def make() -> dict[str, dict]:
            if self.demo_dir is not None:
                return load_demo(self.demo_dir)
            with tempfile.TemporaryDirectory() as tmp:
                return run_demo(Path(tmp))
        return self._once("demo", make)  # type: ignore[return-value]

    def sharing(self, graph: bool) -> dict:
        """`dlsched demo`'s sharing table, with or without the graph extra (onnx)."""
        if graph and not _has("onnx"):
            raise Skip("the graph extra (onnx) is not installed")
        hide = "" if graph else "sys.modules['onnx'] = None; "
        code = (f"import json, sys; {hide}from dlsched.cli.sim_cmd import demo_sharing; "
                "print(json.dumps(demo_sharing()))")
        return self._once(f"sharing-{graph}", lambda: json.loads(_python(code)))  # type: ignore[return-value]

    def predict(self, *argv: str) -> str:
        if not _has("onnx"):
            raise Skip("the graph extra (onnx) is not installed")
        from dlsched.graph.zoo import cache_dir, entry_path

        if not entry_path(argv[0]).is_file():
            raise Skip(f"zoo model {argv[0]} is not exported here (dlsched predict {argv[0]} exports it)")
        code = "import sys; sys.argv = ['dlsched', *sys.argv[1:]]; from dlsched.cli.main import app; app()"
        text = _python(code, "predict", *argv)
        return text.replace(str(cache_dir()) + os.sep, ".../").rstrip("\n")

    def sweep(self):
        def make():
            from dlsched.report.sections_sweep import load_sweep

            if self.sweep_dir is not None:
                return load_sweep(self.sweep_dir)[2]
            code = "import sys; sys.argv = ['dlsched', *sys.argv[1:]]; from dlsched.cli.main import app; app()"
            with tempfile.TemporaryDirectory() as tmp:
                _python(code, "--quiet", "sweep", str(REPO / "docs/examples/sweep-policies.yaml"), "--out",
                        f"{tmp}/sweep", "--workers", "2")
                return load_sweep(Path(tmp) / "sweep")[2]
        return self._once("sweep", make)


def sharing_table(shared: dict) -> str:
    lines = ["| policy | makespan | avg JCT | delivered GPU util | busy GPUs |", "|---|---|---|---|---|"]
    for label in SHARING_LABELS:
        r = shared["policies"][label]
        lines.append(f"| {label} | {_s(r['makespan'])} s | {_s(r['avg_jct'])} s | "
                     f"{r['delivered_gpu_utilization']:.1%} | {r['busy_gpu_utilization']:.1%} |".replace("%", " %"))
    return "\n".join(lines)


def sharing_graph_line(shared: dict) -> str:
    p = shared["policies"]
    runs = ", ".join(f"{label} {_s(p[label]['makespan'])} s ({_s(p[label]['avg_jct'])} s)" for label in SHARING_LABELS)
    return ("With the `graph` extra installed (as `make test` installs it) the predictors read each job's ONNX "
            f"graph instead, and the same run gives makespan (avg JCT): {runs}.")


def graph_predict(sources: Sources) -> str:
    parts = []
    for argv, comment in ((("resnet50", "--batch", "64"), "a zoo model (exported on first use), default predictor"),
                          (("lstm_lm", "--batch", "20"), "")):
        command = f"$ dlsched predict {' '.join(argv)}"
        parts.append(f"{command:<46}# {comment}".rstrip(" #") if comment else command)
        parts.append(sources.predict(*argv))
        parts.append("")
    return "```\n" + "\n".join(parts).rstrip("\n") + "\n```"


def sweep_table(stats) -> str:
    policies = ["fifo", "sjf", "srtf"]
    lines = ["| nodes | FIFO | SJF | SRTF |", "|---|---|---|---|"]
    for nodes in sorted(stats["nodes"].unique()):
        cells = []
        for policy in policies:
            row = stats[(stats["nodes"] == nodes) & (stats["policy"] == policy)].iloc[0]
            text = f"{_s(row['avg_jct.mean'])} ± {_s(row['avg_jct.ci95'])} s"
            if policy != "fifo":
                text += f" (×{row['avg_jct.ratio']:.3f})"
            cells.append(text)
        lines.append(f"| {nodes} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


class Block(NamedTuple):
    """One generated block: the file it lives in, how it is made, and whether that takes long."""

    file: str
    make: Callable[[Sources], str]
    slow: bool


BLOCKS: dict[str, Block] = {
    "demo-table": Block("README.md", lambda src: demo_table(src.demo()), True),
    "demo-ratios": Block("README.md", lambda src: demo_ratios(src.demo()), True),
    "demo-sharing": Block("README.md", lambda src: sharing_table(src.sharing(graph=False)), False),
    "demo-sharing-graph": Block("README.md", lambda src: sharing_graph_line(src.sharing(graph=True)), True),
    "graph-predict": Block("docs/graph.md", graph_predict, False),
    "sweep-table": Block("docs/sweeps.md", lambda src: sweep_table(src.sweep()), True),
}


def _pattern(name: str) -> re.Pattern:
    tag = re.escape(name)
    return re.compile(rf"(<!-- readme-figures:{tag} -->\n)(.*?)(\n<!-- /readme-figures:{tag} -->)", re.S)


def render_block(text: str, name: str, body: str, where: str = "README") -> str:
    """``text`` with block ``name`` replaced by ``body``; a missing block is an error."""
    pattern = _pattern(name)
    if not pattern.search(text):
        raise SystemExit(f"error: {where} has no block <!-- readme-figures:{name} --> ... "
                         f"<!-- /readme-figures:{name} -->")
    return pattern.sub(lambda m: m.group(1) + body + m.group(3), text)


def render(readme: str, summaries: dict[str, dict]) -> str:
    """``readme`` with the demo blocks regenerated from ``summaries`` (kept for callers of old)."""
    for name in ("demo-table", "demo-ratios"):
        readme = render_block(readme, name, BLOCKS[name].make(_Fixed(summaries)))
    return readme


class _Fixed(Sources):
    def __init__(self, summaries: dict[str, dict]) -> None:
        super().__init__()
        self._cache["demo"] = summaries


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="exit 1 when a block is out of date")
    mode.add_argument("--write", action="store_true", help="rewrite the blocks")
    mode.add_argument("--list", action="store_true", help="list the blocks and exit")
    parser.add_argument("--only", help="comma-separated block names (default: all)")
    parser.add_argument("--fast", action="store_true", help="only the blocks that take seconds")
    parser.add_argument("--from", dest="source", type=Path, help="a finished `dlsched demo --out DIR`")
    parser.add_argument("--sweep-from", type=Path, help="a finished sweep of docs/examples/sweep-policies.yaml")
    parser.add_argument("--readme", type=Path, help="README file to use instead of the repository's")
    args = parser.parse_args(argv)
    if args.list:
        for name, block in BLOCKS.items():
            print(f"{name:20} {block.file:16} {'slow' if block.slow else 'fast'}")
        return 0
    names = [n.strip() for n in args.only.split(",")] if args.only else list(BLOCKS)
    unknown = [n for n in names if n not in BLOCKS]
    if unknown:
        raise SystemExit(f"error: --only {','.join(unknown)}: no such block; known: {', '.join(BLOCKS)}")
    if args.fast:
        names = [n for n in names if not BLOCKS[n].slow]
    sources = Sources(args.source, args.sweep_from)
    files: dict[Path, tuple[str, str]] = {}
    stale = skipped = 0
    for name in names:
        block = BLOCKS[name]
        path = args.readme if (args.readme is not None and block.file == "README.md") else REPO / block.file
        old, new = files.get(path, (path.read_text(), path.read_text()))
        try:
            body = block.make(sources)
        except Skip as why:
            print(f"skipped {name}: {why}", file=sys.stderr)
            skipped += 1
            continue
        files[path] = (old, render_block(new, name, body, block.file))
    for path, (old, new) in files.items():
        if new == old:
            continue
        if args.write:
            path.write_text(new)
            print(f"wrote {path}")
            continue
        stale += 1
        sys.stdout.writelines(difflib.unified_diff(old.splitlines(True), new.splitlines(True),
                                                   str(path), f"{path} (regenerated)"))
    if stale:
        print("figures are out of date: run python scripts/readme_figures.py --write", file=sys.stderr)
        return 1
    if not args.write:
        print(f"figures are current ({len(names) - skipped} blocks checked, {skipped} skipped)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
