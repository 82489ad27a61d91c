"""Speed-up of one sweep from 1 to 2 workers: local processes, and a real Dask cluster on 127.0.0.1.

Run: OMP_NUM_THREADS=1 PYTHONPATH=src .venv/bin/python benchmarks/bench_sweep.py [--jobs 6000] [--no-dask]

The sweep is 8 cells (FIFO, SJF, SRTF and QSSF x 2 seeds of the built-in workload, 40 nodes); each
engine runs it into a fresh directory with 1 and then 2 workers. The speed-up is bounded by the
machine's free cores (2 on the shared development machine) and by the longest cell.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dlsched.sweep.engine_local import LocalEngine
from dlsched.sweep.run import run_sweep
from dlsched.sweep.spec import load_spec

SPEC = """base: {{jobs: {jobs}, nodes: 40}}
grid:
  policy: [fifo, sjf, srtf, qssf]
  seed: [0, 1]
"""


def timed(spec, out: Path, engine) -> float:
    t0 = time.perf_counter()
    result = run_sweep(spec, out, engine, emit=lambda line: None)
    wall = time.perf_counter() - t0
    if result.failed or result.done != len(spec.cells):
        raise SystemExit(f"bench_sweep: {result.failed} cells failed in {out}")
    return wall


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=6000, help="jobs of the built-in workload per cell")
    parser.add_argument("--no-dask", action="store_true", help="only the local engine")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-sweep-") as tmp:
        root = Path(tmp)
        (root / "spec.yaml").write_text(SPEC.format(jobs=args.jobs))
        spec = load_spec(root / "spec.yaml")
        print(f"sweep: {len(spec.cells)} cells ({args.jobs} built-in jobs each); cores: {os.cpu_count()}")
        rows = []
        one = timed(spec, root / "local1", LocalEngine(1))
        two = timed(spec, root / "local2", LocalEngine(2))
        rows.append(("local processes", one, two))
        if not args.no_dask:
            try:
                from dlsched.sweep.devcluster import local_dask_cluster
                from dlsched.sweep.engine_dask import DaskEngine
            except ImportError:
                print("dask.distributed is not installed: Dask rows skipped", file=sys.stderr)
            else:
                src = str(Path(__file__).resolve().parents[1] / "src")
                walls = []
                for workers in (1, 2):
                    with local_dask_cluster(workers, pythonpath=src) as address:
                        walls.append(timed(spec, root / f"dask{workers}", DaskEngine(address)))
                rows.append(("dask.distributed", *walls))
        for name, one, two in rows:
            print(f"{name:18s} 1 worker {one:6.2f} s   2 workers {two:6.2f} s   speed-up {one / two:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
