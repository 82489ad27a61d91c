"""What borrowing does to queueing: fixed VCs against queues that lend and borrow.

    python -m dlsched.experiments.dlsched.borrowing --seeds 10            # built-in workload, FIFO and QSSF
    python -m dlsched.experiments.dlsched.borrowing --seeds 10 --philly ../shared/traces/philly \
        --write-docs docs/queues.md                               # regenerate the docs' table

Each cell runs the same jobs twice through the ordinary run path (``build_run``): once on the
cluster file whose queues have ``borrow_limit = 0`` (decision for decision the plain Helios VCs)
and once on the same nodes with every VC allowed to borrow as many GPUs as it owns and to lend
at most half of its own (``docs/examples/queues.toml``). The protocol is the sharing
experiments' (:mod:`dlsched.experiments.protocol`): differences paired per seed, mean and 95 %
t-interval over the seeds, relative wait reduction with its interval, and win counts. Prints a
Markdown table; ``--write-docs`` puts it between the markers of docs/queues.md.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import tempfile
from pathlib import Path

from dlsched.experiments.protocol import check_seeds, paired_gain, t_quantile

EXAMPLES = Path(__file__).resolve().parents[4] / "docs" / "examples"
START, END = "<!-- borrowing-table: start -->", "<!-- borrowing-table: end -->"


def queues_toml(vc_nodes: dict[str, int], gpus: int, borrow: bool) -> str:
    """A cluster file: one group per VC, one queue per VC (borrowing on or off)."""
    lines = ["[defaults]", f"gpus = {gpus}", ""]
    for vc, n in vc_nodes.items():
        lines += ["[[groups]]", f'vc = "{vc}"', f"nodes = {n}", ""]
    for vc, n in vc_nodes.items():
        own = n * gpus
        lines += ["[[queues]]", f'name = "{vc}"', f"borrow_limit = {own if borrow else 0}"]
        lines += [f"lend_limit = {own // 2}", ""] if borrow else [""]
    return "\n".join(lines)


def simulate(values: dict, out: Path) -> dict:
    """One run through the ordinary run path; its summary."""
    from dlsched.run.build import build_run
    from dlsched.run.options import configs_from_options

    [config], _ = configs_from_options(values)
    return build_run(config).simulate(out)


def _reclaims(summary: dict) -> int:
    return sum(q["reclaims"] for q in summary.get("per_queue", {}).values())


def _borrowed_share(summary: dict) -> float:
    rows = summary.get("per_queue", {}).values()
    used = sum(q["used_gpu_hours"] for q in rows)
    return sum(q["borrowed_gpu_hours"] for q in rows) / used if used else 0.0


def _paired(diffs: list[float]) -> str:
    mean = statistics.fmean(diffs)
    if len(diffs) < 2:
        return f"{mean:+,.0f}"
    half = t_quantile(len(diffs) - 1) * statistics.stdev(diffs) / math.sqrt(len(diffs))
    return f"{mean:+,.0f} ± {half:,.0f}"


def _gain(base: list[float], values: list[float]) -> str:
    """Relative reduction, paired per seed: mean [95 % CI] (the protocol's ``paired_gain``)."""
    if not all(base):
        return "–"  # a seed without queueing has no relative reduction
    g = paired_gain(base, values)
    if g.seeds < 2:
        return f"{100 * g.mean:.0f} %"
    return f"{100 * g.mean:.0f} % [{100 * g.low:.0f}, {100 * g.high:.0f}]"


def cell(base: dict, fixed: Path, borrow: Path, seeds: list[int], tmp: Path) -> dict:
    """Fixed and borrowing runs of ``base`` over ``seeds``: per-seed summaries of both."""
    rows = []
    for seed in seeds:
        values = {**base, "seed": seed} if "trace" not in base else dict(base)
        a = simulate({**values, "cluster": fixed}, tmp / f"f{seed}")
        b = simulate({**values, "cluster": borrow}, tmp / f"b{seed}")
        rows.append((a, b))
    return {"rows": rows}


def table(results: dict[str, dict]) -> str:
    head = ("| workload | policy | runs | avg queue delay, fixed (s) | borrowing (s) | paired diff (s) | "
            "wait reduction [95 % CI] | avg JCT, fixed (s) | borrowing (s) | paired diff (s) | runs with less wait | "
            "reclaims / run | borrowed GPU time |")
    lines = [head, "|" + "---|" * 13]
    for label, res in results.items():
        rows = res["rows"]
        wf = [a["avg_queue_delay"] for a, _ in rows]
        wb = [b["avg_queue_delay"] for _, b in rows]
        jf = [a["avg_jct"] for a, _ in rows]
        jb = [b["avg_jct"] for _, b in rows]
        workload, policy = label.split(" / ")
        lines.append(
            f"| {workload} | {policy} | {len(rows)} | {statistics.fmean(wf):,.0f} | {statistics.fmean(wb):,.0f} | "
            f"{_paired([y - x for x, y in zip(wf, wb)])} | {_gain(wf, wb)} | {statistics.fmean(jf):,.0f} | "
            f"{statistics.fmean(jb):,.0f} | {_paired([y - x for x, y in zip(jf, jb)])} | "
            f"{sum(y < x for x, y in zip(wf, wb))} of {len(rows)} | "
            f"{statistics.fmean(_reclaims(b) for _, b in rows):,.1f} | "
            f"{100 * statistics.fmean(_borrowed_share(b) for _, b in rows):.1f} % |")
    return "\n".join(lines)


def write_docs(path: Path, text: str) -> None:
    """Replace what lies between the table markers of ``path`` with ``text``."""
    doc = path.read_text(encoding="utf-8")
    if START not in doc or END not in doc:
        raise ValueError(f"--write-docs {path}: no {START} ... {END} markers in it")
    head, rest = doc.split(START, 1)
    _, tail = rest.split(END, 1)
    path.write_text(f"{head}{START}\n{text}\n{END}{tail}", encoding="utf-8")


def _fail(message: str) -> None:
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=10, help="built-in workload seeds (0..N-1); 0: none")
    parser.add_argument("--jobs", type=int, default=20000, help="built-in workload size")
    parser.add_argument("--policies", default="fifo,qssf")
    parser.add_argument("--philly", type=Path, default=None,
                        help="../shared/traces/philly: also run the Helios reference Philly window")
    parser.add_argument("--write-docs", type=Path, default=None,
                        help="docs/queues.md: replace the table between its borrowing-table markers")
    args = parser.parse_args(argv)
    seeds: list[int] = []
    if args.seeds:
        try:
            seeds = check_seeds(args.seeds)
        except ValueError as exc:
            _fail(str(exc))
    if args.jobs < 1:
        _fail(f"--jobs must be at least 1, got {args.jobs:,}")
    if args.philly is not None and not (args.philly / "philly_vc_config.csv").is_file():
        _fail(f"--philly {args.philly}: no philly_vc_config.csv there (want ../shared/traces/philly)")
    if args.write_docs is not None and not args.write_docs.is_file():
        _fail(f"--write-docs {args.write_docs}: no such file")
    results: dict[str, dict] = {}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = Path(tmp_name)
        for policy in args.policies.split(",") if seeds else ():
            base = {"jobs": args.jobs, "policy": policy}
            results[f"built-in {args.jobs:,} jobs / {policy}"] = cell(
                base, EXAMPLES / "queues-fixed.toml", EXAMPLES / "queues.toml", seeds, tmp / f"builtin-{policy}")
        if args.philly is not None:
            from dlsched.traces.vc import load_vc_config

            vc_nodes = load_vc_config(args.philly / "philly_vc_config.csv")
            for name, borrow in (("fixed", False), ("borrow", True)):
                (tmp / f"philly-{name}.toml").write_text(queues_toml(vc_nodes, 8, borrow))
            trace = args.philly / "reference_run" / "input_cluster_log_helios_format.csv.gz"
            for policy in args.policies.split(","):
                base = {"trace": trace, "trace_format": "helios-log", "start": "2017-10-01 00:00:00",
                        "end": "2017-11-30 23:59:00", "policy": policy, "compat": "helios"}
                results[f"Philly Oct-Nov 2017 / {policy}"] = cell(
                    base, tmp / "philly-fixed.toml", tmp / "philly-borrow.toml", [0], tmp / f"philly-{policy}")
    text = table(results)
    if args.write_docs is not None:
        write_docs(args.write_docs, text)
    print(text)
    return text


if __name__ == "__main__":
    main()
