"""Time of `dlsched report` on a comparison of three policies x 70,000 jobs.

Printed beside a baseline measured in the same run (reading the same comparison back with
pandas), because this machine's speed drifts: the target is the report in under 3 s on a quiet
machine, i.e. a small multiple of the time to read its inputs.

    python benchmarks/bench_report.py [--jobs 70000] [--rounds 3]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.report_fixtures import write_comparison

from dlsched.report import build_report


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=70_000)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    import pandas as pd

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_comparison(root, n=args.jobs)
        build_report(root)  # warm imports (matplotlib, fonts)
        report, baseline = [], []
        for _ in range(args.rounds):
            t0 = time.perf_counter()
            for csv in sorted(root.glob("*/jobs.csv")):
                pd.read_csv(csv)
            baseline.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            build_report(root)
            report.append(time.perf_counter() - t0)
    print(f"report of 3 policies x {args.jobs:,} jobs: best {min(report):.2f} s "
          f"(target < 3 s on a quiet machine); reading the jobs.csv files back (baseline): "
          f"{min(baseline):.2f} s; ratio {min(report) / min(baseline):.1f}x")


if __name__ == "__main__":
    main()
