"""The simulation loop before and after a change, side by side in one run (issue 9's "no slower").

    .venv/bin/python benchmarks/bench_kernel.py [--baseline REV] [--rounds 5] [--instructions]
        [--policies fifo,sjf,srtf] [--instruction-policies fifo,sjf,srtf]

The baseline (default: 348100d, the last commit before the shared kernel) is checked out into a
temporary git worktree; each round runs the baseline and the working tree in fresh processes,
alternately, on the 68,503 Philly jobs of the Helios reference window (FIFO, SJF and SRTF with
``--compat helios``), timing the simulation alone (loading excluded). Shared machines drift 2-3x
from minute to minute, so the best of the rounds is compared, and ``--instructions`` also counts
CPU instructions of one simulation (FIFO by default) on a 20-day slice under valgrind
(independent of load: the same binary and input give the same count; ``PYTHONHASHSEED=0``).
With gcc and valgrind's header, a small library switches callgrind on around the simulation
alone; otherwise the count is the difference of a two-simulation and a one-simulation run.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SHARED = ROOT.parent / "shared"
TRACE = SHARED / "traces/philly/reference_run/input_cluster_log_helios_format.csv.gz"
VCS = SHARED / "traces/philly/philly_vc_config.csv"
SLICE_END = "2017-10-20 23:59:00"  # instruction counts: a 20-day slice keeps valgrind to minutes

CHILD = r'''
import ctypes, json, os, sys, time
from dlsched.traces.api import load_trace
from dlsched.traces.vc import load_vc_config
from dlsched.core.cluster import ClusterSpec
try:
    from dlsched.registry import make_policy
except ImportError:  # before the kernel: the old registry
    from dlsched.policies import make_policy
from dlsched.sim import SimConfig, Simulator
trace, vcs, end, policies, reps = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4].split(","), int(sys.argv[5])
vc = load_vc_config(vcs)
tr = load_trace(trace, "helios-log", start="2017-10-01 00:00:00", end=end, vcs=list(vc))
cluster = ClusterSpec.from_vc_sizes(vc)
out = {"jobs": len(tr.jobs)}
# under callgrind: count only the last simulation (instrumentation switched on around it)
cg = ctypes.CDLL(os.environ["DLSCHED_CG_LIB"]) if os.environ.get("DLSCHED_CG_LIB") else None
for name in policies:
    best = float("inf")
    for rep in range(reps):
        sim = Simulator(cluster, make_policy(name), SimConfig(compat="helios"))
        if cg is not None and rep == reps - 1:
            cg.cg_start()
        t = time.perf_counter()
        res = sim.run(tr.jobs)
        best = min(best, time.perf_counter() - t)
        if cg is not None and rep == reps - 1:
            cg.cg_stop()
    out[name] = {"seconds": best, "avg_jct": sum(j.end_time - j.submit_time for j in res.jobs) / len(res.jobs)}
print(json.dumps(out))
'''


def run_child(src: Path, end: str, policies: str, reps: int, prefix: list[str] | None = None,
              env: dict[str, str] | None = None) -> tuple[dict, str]:
    env_py = [sys.executable, "-c", CHILD, str(TRACE), str(VCS), end, policies, str(reps)]
    proc = subprocess.run((prefix or []) + env_py, capture_output=True, text=True,
                          env={"PYTHONPATH": str(src), "OMP_NUM_THREADS": "1", "PATH": "/usr/bin:/bin",
                               "PYTHONHASHSEED": "0", **(env or {})})
    if proc.returncode != 0:
        raise SystemExit(f"error: the benchmark child failed for {src}:\n{proc.stderr[-2000:]}")
    lines = [ln for ln in proc.stdout.splitlines() if ln.startswith("{")]
    return (json.loads(lines[-1]) if lines else {}), proc.stderr


CG_SOURCE = """#include <valgrind/callgrind.h>
void cg_start(void) { CALLGRIND_START_INSTRUMENTATION; }
void cg_stop(void) { CALLGRIND_STOP_INSTRUMENTATION; }
"""


def callgrind_switch(tmp: Path) -> Path | None:
    """A tiny library that switches callgrind's instrumentation on and off from Python, so one
    valgrind run counts exactly one simulation (loading runs uninstrumented, ~10x faster). None
    without a C compiler or valgrind's header."""
    header = Path("/usr/include/valgrind/callgrind.h")
    if shutil.which("gcc") is None or not header.exists():
        return None
    (tmp / "cg.c").write_text(CG_SOURCE)
    lib = tmp / "libcg.so"
    subprocess.run(["gcc", "-O2", "-shared", "-fPIC", "-o", str(lib), str(tmp / "cg.c")], check=True)
    return lib


def refs(stderr: str) -> int:
    for line in stderr.splitlines():
        if "refs:" in line:
            return int(line.split("refs:")[1].replace(",", "").strip())
    raise SystemExit("error: valgrind printed no instruction count")


def instructions(src: Path, policy: str, lib: Path | None) -> int:
    """Instructions of the second of two simulations (as in the timing rounds, the jobs ran before)."""
    cmd = ["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null"]
    if lib is not None:
        _, err = run_child(src, SLICE_END, policy, 2, cmd + ["--instr-atstart=no"], {"DLSCHED_CG_LIB": str(lib)})
        return refs(err)
    _, err2 = run_child(src, SLICE_END, policy, 2, cmd)  # no switch: difference of two whole runs
    _, err1 = run_child(src, SLICE_END, policy, 1, cmd)
    return refs(err2) - refs(err1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--baseline", default="348100d", help="git revision to compare with")
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds (best is kept)")
    ap.add_argument("--instructions", action="store_true", help="also count instructions under valgrind")
    ap.add_argument("--policies", default="fifo,sjf,srtf", help="comma-separated policies to time")
    ap.add_argument("--instruction-policies", default="fifo", help="policies whose instructions are counted")
    args = ap.parse_args()
    if not TRACE.exists():
        print(f"reference window not available ({TRACE}): nothing to measure")
        return
    tmp = Path(tempfile.mkdtemp(prefix="dlsched-baseline-"))
    base = tmp / "tree"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.baseline],
                   check=True, capture_output=True)
    try:
        trees = {"baseline": base / "src", "current": ROOT / "src"}
        best: dict[str, dict[str, float]] = {k: {} for k in trees}
        jct: dict[str, dict[str, float]] = {k: {} for k in trees}
        n = 0
        for _ in range(args.rounds):
            for label, src in trees.items():
                res, _ = run_child(src, "2017-11-30 23:59:00", args.policies, 1)
                n = res.pop("jobs")
                for pol, r in res.items():
                    best[label][pol] = min(best[label].get(pol, float("inf")), r["seconds"])
                    jct[label][pol] = r["avg_jct"]
        print(f"simulation only, {n} Philly jobs, --compat helios, best of {args.rounds} alternating rounds:")
        print(f"  {'policy':6s} {'baseline ' + args.baseline:>18s} {'current':>10s} {'current/baseline':>17s}  avg JCT equal")
        for pol in best["current"]:
            b, c = best["baseline"][pol], best["current"][pol]
            same = abs(jct["baseline"][pol] - jct["current"][pol]) < 1e-6
            print(f"  {pol:6s} {b:17.3f}s {c:9.3f}s {c / b:16.3f}x  {same}")
        if args.instructions:
            if shutil.which("valgrind") is None:
                print("instructions: valgrind not installed")
            else:
                lib = callgrind_switch(tmp)
                for pol in args.instruction_policies.split(","):
                    counts = {label: instructions(src, pol, lib) for label, src in trees.items()}
                    print(f"instructions of one {pol.upper()} simulation (20-day slice): baseline "
                          f"{counts['baseline']:,}, current {counts['current']:,} "
                          f"({counts['current'] / counts['baseline']:.3f}x)")
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)], capture_output=True)
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
