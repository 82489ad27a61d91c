"""Time the commands whose run time the docs quote, beside a baseline measured in the same run.

On a shared machine a bare "takes 40 s" says more about the neighbours than about dlsched, so
each figure in the docs comes from this script: the wall time and the CPU time (user + system of
the command and its children, which the load hardly changes) of each claimed command, the 1-minute
load average while it ran, and the same figures for a baseline command run first
(``dlsched simulate --policy fifo --out DIR``: the built-in 20,000 jobs), with the date.

    python scripts/time_doc_claims.py                      # every claim (the long ones: ~1 h loaded)
    python scripts/time_doc_claims.py --only reproduce-queues-borrowing,interference-evaluate
    python scripts/time_doc_claims.py --list

Prints one markdown table; docs quote its rows. Exit code 2 on an unknown name.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import resource
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BASELINE = ("baseline", "dlsched simulate --policy fifo --out {tmp}/baseline", "the baseline")
#: (name, command, where the docs quote its time); {tmp} is a scratch folder
CLAIMS = (
    ("reproduce-topo-table1", "dlsched reproduce topo-table1", "docs/reproduce.md"),
    ("reproduce-topo-scenario1", "dlsched reproduce topo-scenario1", "docs/reproduce.md"),
    ("reproduce-queues-borrowing", "dlsched reproduce queues-borrowing", "docs/reproduce.md"),
    ("reproduce-coscheml", "dlsched reproduce coscheml", "docs/reproduce.md"),
    ("reproduce-horus-table6", "dlsched reproduce horus-table6", "docs/reproduce.md"),
    ("reproduce-colocation-oracle", "dlsched reproduce colocation-oracle", "docs/reproduce.md"),
    ("reproduce-sharing-three", "dlsched reproduce horus-table6 coscheml colocation-oracle",
     "README.md, docs/sharing-policies.md"),
    ("reproduce-interference", "dlsched reproduce interference", "docs/reproduce.md"),
    ("reproduce-helios-table5", "dlsched reproduce helios-table5", "docs/reproduce.md"),
    ("reproduce-helios-fidelity", "dlsched reproduce helios-fidelity", "docs/reproduce.md"),
    ("reproduce-helios-qssf-builtin", "dlsched reproduce helios-qssf-builtin", "docs/reproduce.md"),
    ("reproduce-horus-table7", "dlsched reproduce horus-table7", "docs/reproduce.md"),
    ("reproduce-helios-qssf-philly", "dlsched reproduce helios-qssf-philly", "docs/reproduce.md"),
    ("reproduce-topo-scenario2", "dlsched reproduce topo-scenario2", "docs/reproduce.md, docs/topology.md"),
    ("reproduce-backfill-1seed", "dlsched reproduce backfill --seeds 1", "docs/reproduce.md"),
    ("reproduce-backfill-philly-1seed", "dlsched reproduce backfill-philly --seeds 1", "docs/reproduce.md"),
    ("interference-evaluate", "dlsched interference evaluate", "docs/interference.md"),
    ("predictor-evaluate", "dlsched predictor evaluate", "docs/predictors.md"),
    ("energy-replay", "dlsched energy replay --series ../shared/traces/philly/philly_node_sequence.csv.gz "
                      "--eval-start 2017-12-01 --eval-end 2017-12-14 --out {tmp}/ces", "docs/energy.md"),
    ("experiment-preemption", "dlsched experiment preemption --seeds 10 --jobs 4000 --markdown {tmp}/p.md",
     "docs/preemption.md"),
)


def measure(command: str, tmp: Path) -> tuple[float, float, float, int]:
    """(wall s, CPU s of the command and its children, 1-min load average after, exit code)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    proc = subprocess.run(shlex.split(command.format(tmp=tmp)), cwd=REPO, env=env, stdout=subprocess.DEVNULL,
                          stderr=subprocess.PIPE, text=True)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode:
        print(f"note: `{command}` exited {proc.returncode}: {proc.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
    return wall, cpu, os.getloadavg()[0], proc.returncode


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default="", help="comma-separated claim names (default: all)")
    parser.add_argument("--list", action="store_true", help="list the claims and exit")
    args = parser.parse_args(argv)
    names = {c[0] for c in CLAIMS}
    wanted = [n for n in args.only.split(",") if n] or [c[0] for c in CLAIMS]
    unknown = [n for n in wanted if n not in names]
    if unknown:
        print(f"error: --only {','.join(unknown)}: no such claim; choose from {', '.join(sorted(names))}",
              file=sys.stderr)
        return 2
    if args.list:
        for name, command, where in CLAIMS:
            print(f"{name}: {command}  ({where})")
        return 0
    print(f"measured {dt.date.today().isoformat()} on {os.cpu_count()} cores; CPU = user + system of the command")
    print("| claim | command | wall (s) | CPU (s) | load avg | exit |")
    print("|---|---|---|---|---|---|")
    with tempfile.TemporaryDirectory(prefix="dlsched-claims-") as tmp:
        for name, command, _ in (BASELINE, *(c for c in CLAIMS if c[0] in wanted)):
            wall, cpu, load, code = measure(command, Path(tmp))
            print(f"| {name} | `{command.format(tmp='DIR')}` | {wall:,.1f} | {cpu:,.1f} | {load:.1f} | {code} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
