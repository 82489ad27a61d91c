"""benchmarks/bench_nodefit.py measures what it says: the table and feasible() give the same
answers, the number of fitting (pod, node) pairs follows from the generated cluster, and a bad
size is one error line."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BENCH = str(ROOT / "benchmarks" / "bench_nodefit.py")
ENV = {**os.environ, "PYTHONPATH": str(ROOT / "src")}


def test_small_run_reports_every_row_and_the_fitting_pairs() -> None:
    out = subprocess.run([sys.executable, BENCH, "--nodes", "40", "--pods", "12", "--bound", "2", "--rounds", "1",
                          "--json"], capture_output=True, text=True, check=True, timeout=120, env=ENV).stdout
    r = json.loads(out)
    assert r["checks"] == 480 and set(r["rows"]) == {"table", "build", "feasible", "baseline"}
    assert r["rows"]["feasible"]["checks"] == 10 * 40
    # the pods tolerate the taint; a node fits an H100 pod that is not cordoned with 8 - 2 GPUs left
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import bench_nodefit as b
    rng = __import__("random").Random(7)
    nodes = b.make_nodes(40, rng)
    gpus = [rng.choice((1, 1, 2, 4, 8)) for _ in range(12)]
    open_h100 = sum(1 for n in nodes if n["metadata"]["labels"]["gpu.example.com/model"] == "H100"
                    and not n["spec"].get("unschedulable"))
    assert r["feasible_pairs"] == sum(open_h100 for g in gpus if g <= 6) > 0
    assert all(row["checks_per_s"] > 0 for name, row in r["rows"].items() if name != "build")


def test_bad_size_is_one_error_line() -> None:
    p = subprocess.run([sys.executable, BENCH, "--nodes", "0"], capture_output=True, text=True, timeout=60, env=ENV)
    assert p.returncode == 2 and p.stderr.strip().splitlines()[-1].endswith("error: --nodes must be at least 1")
