"""Why EASY with predictions behaves as it does on a workload: per-job traces of one seed.

    PYTHONPATH=src python scripts/backfill_explain.py --philly \\
        ../shared/traces/philly/reference_run/input_cluster_log_helios_format.csv.gz [--seed 0] [--jobs 1000] [--nodes 16]

Runs ``fifo``, ``fifo+greedy``, ``easy-limit`` and ``easy-pred`` of ``dlsched experiment backfill``
on one seed, in the experiment's order on the same job objects (so each run's numbers are the
table's for that seed; without ``--philly`` the built-in workload of ``--jobs`` jobs), and prints
what the summary table cannot show:

* how many jobs ``easy-pred`` starts at another time than greedy backfill (0: the reservation
  never held anything back), and how many each variant backfilled;
* ``easy-pred``'s reservations: how many were made for the very instant they were made (the head
  is reserved *now*: a running job past its prediction is taken to end now, so by the estimates
  the head's GPUs are free at once, every later job fits into EASY's "extra" GPUs and backfill
  is greedy), how many broke and by how much;
* how short QSSF's predictions were (true duration / prediction of the jobs that ran);
* the wait of the jobs that held an ``easy-pred`` reservation (the heads) under each variant.

The numbers are the measured basis of docs/backfill.md's paragraph on Philly.
"""

from __future__ import annotations

import argparse
import csv
import json
import statistics
import sys
import tempfile
from pathlib import Path

SHOWN = ("fifo", "fifo+greedy", "easy-limit", "easy-pred")


def _rows(path: Path) -> dict[str, dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as fh:
        return {row["job_id"]: row for row in csv.DictReader(fh)}


def _quantiles(values: list[float]) -> str:
    if not values:
        return "none"
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return f"median {q[1]:,.1f}, quartiles {q[0]:,.1f}-{q[2]:,.1f}, max {max(values):,.1f}"


def explain(seed: int, jobs: int, nodes: int, philly: Path | None) -> list[str]:
    """The report's lines for one seed."""
    from dlsched.experiments.dlsched.backfill import LIMITS, VARIANTS
    from dlsched.run.build import build_run, load_inputs
    from dlsched.run.options import configs_from_options

    if philly is not None:
        from dlsched.experiments.dlsched.backfill_philly import philly_source

        source, info = philly_source(philly, jobs, nodes, LIMITS)
        inputs, jobs = source(seed), info["jobs"]
    else:
        inputs = None
    runs: dict[str, tuple[dict, dict, dict]] = {}
    with tempfile.TemporaryDirectory(prefix="dlsched-explain-") as tmp:
        for v in VARIANTS:   # the experiment's order on the same job objects, up to the last shown
            values = {"policy": v.policy, "jobs": jobs, "seed": seed, "time_limits": LIMITS, "nodes": nodes,
                      "backfill": v.backfill, "param": [f"{k}={x}" for k, x in v.params.items()]}
            (config,), _ = configs_from_options(values)
            if inputs is None:
                inputs = load_inputs(config)
            out = Path(tmp) / v.label
            summary = build_run(config, inputs=inputs).simulate(out)
            res = out / "reservations.csv"
            runs[v.label] = (summary, _rows(out / "jobs.csv"), _rows(res) if res.exists() else {})
            if v.label == SHOWN[-1]:
                break
    from dlsched.core.truth import duration as true_duration

    # easy-pred's predictions stay on the job objects (the runs share them, as in the experiment)
    preds = {j.job_id: (j.pred_duration, true_duration(j)) for j in inputs.jobs}
    greedy, easy = runs["fifo+greedy"][1], runs["easy-pred"][1]
    moved = sum(1 for jid, row in easy.items() if row["start_time"] != greedy[jid]["start_time"])
    lines = [f"seed {seed}: {len(easy):,} jobs on {nodes} nodes of 8 GPUs, limits {LIMITS}",
             f"easy-pred starts {moved:,} jobs at another time than fifo+greedy"]
    for label in SHOWN[2:]:
        r = runs[label][0].get("reservations", {})
        lines.append(f"{label}: {r.get('made', 0):,} reservations made, {r.get('broken', 0):,} broken, "
                     f"{r.get('backfilled_jobs', 0):,} jobs backfilled")
    book = runs["easy-pred"][2]
    at_once = [row for row in book.values() if float(row["first_reserved_start"]) <= float(row["reserved_at"])]
    broken = [float(row["delay_s"]) for row in book.values() if row["kept"] != "yes"]
    lines.append(f"easy-pred: {len(at_once):,} of {len(book):,} reservations were for the instant they were made "
                 f"(reserved start = now)")
    lines.append(f"easy-pred broken reservations' delay s: {_quantiles(broken)}")
    short = [d / p for p, d in preds.values() if p == p and p > 0 and d > p]
    ran = sum(1 for p, _ in preds.values() if p == p)
    lines.append(f"QSSF predictions: {len(short):,} of {ran:,} jobs ran longer than predicted; "
                 f"true / predicted of those: {_quantiles(short)}")
    heads = list(book)
    lines.append(f"wait s of the {len(heads):,} jobs that held an easy-pred reservation:")
    for label in SHOWN:
        rows = runs[label][1]
        waits = [float(rows[j]["queue_delay"]) for j in heads]
        lines.append(f"  {label:<12} mean {statistics.fmean(waits) if waits else 0.0:>10,.0f}   "
                     f"max {max(waits, default=0.0):>10,.0f}")
    return lines


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--philly", type=Path, default=None, help="the reference run's Philly trace (else built-in)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--nodes", type=int, default=16)
    ap.add_argument("--json", action="store_true", help="print the lines as a JSON list")
    args = ap.parse_args()
    if args.philly is not None and not args.philly.is_file():
        print(f"error: --philly {args.philly}: no such file", file=sys.stderr)
        return 2
    for name in ("jobs", "nodes"):
        if getattr(args, name) < 1:
            print(f"error: --{name} must be >= 1, got {getattr(args, name)}", file=sys.stderr)
            return 2
    if args.seed < 0:
        print(f"error: --seed must be >= 0, got {args.seed}", file=sys.stderr)
        return 2
    lines = explain(args.seed, args.jobs, args.nodes, args.philly)
    print(json.dumps(lines, indent=1) if args.json else "\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
