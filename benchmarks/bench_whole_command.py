"""The whole command, as users wait for it, against the reference simulator in the same run.

`dlsched simulate --policy fifo --compat helios` on the Philly reference window (68,503 jobs, 11
VCs, 352 nodes) runs as a subprocess -- start-up, trace parsing, simulation and writing results
included -- and is compared with HeliosArtifact's "QSSF Service" simulator doing FIFO on the same
jobs, measured just before it on the same machine (timings here drift 2-3x from hour to hour, so
only a same-run ratio means anything). Prints both wall times, the ratio (target >= 100x), the
average JCT of both (same workload: they agree to a fraction of a second) and dlsched's own
breakdown from `--timings`: start-up, load, simulate, write, plus the interpreter's boot and
exit, which only the outside clock sees. The CPU seconds (user + system) of both are printed
too, with their ratio: on a shared machine the load stretches wall time far more than CPU time,
so the CPU ratio shows whether a missed wall-clock target is the code or the neighbours (the
reference simulates in two processes: its CPU time is about twice its quiet-machine wall time,
so the CPU ratio flatters dlsched; the target is the wall-clock ratio).

    .venv/bin/python benchmarks/bench_whole_command.py [--runs 3] [--reference-dir DIR]
        [--reference-python PY] [--skip-reference]

Without a prepared reference it prints "reference not available" and still measures dlsched.

Preparing the reference (once, outside this repository; none of its code is copied here). It is
the public repository S-Lab-System-Group/HeliosArtifact (MIT); its pinned requirements do not
install on Python 3.11, these do (pandas must stay < 2):

    SHARED=/work/shared                               # this project's shared/ folder
    git clone <HeliosArtifact> /work/ref-helios      # or: git --git-dir=MIRROR archive HEAD | tar -x
    python3.11 -m venv /work/ref-venv
    /work/ref-venv/bin/pip install pandas==1.5.3 "numpy<2" lightgbm==3.3.5 scikit-learn==1.3.2 \\
        matplotlib==3.7.5 seaborn==0.12.2
    cd "/work/ref-helios/framework/QSSF Service"
    mkdir -p data/Philly
    zcat "$SHARED/traces/philly/reference_run/input_cluster_log_helios_format.csv.gz" > data/Philly/cluster_log.csv
    (cd data && /work/ref-venv/bin/python vc_dict_generator.py -c Philly)
    zcat "$SHARED/traces/philly/reference_run/input_qssf_priority_Philly_lgb.csv.gz" > estimators/Philly_lgb.csv

then pass `--reference-dir "/work/ref-helios/framework/QSSF Service" --reference-python
/work/ref-venv/bin/python`, or set DLSCHED_REFERENCE_DIR and DLSCHED_REFERENCE_PYTHON (default: the
`python` of a `venv`/`.venv` beside or above that folder, else /work/ref-venv). The benchmark runs
`TZ=UTC python simulator.py -e=Philly -t=./data/Philly -s fifo` there; it exits 1 at the very end
(a known bug: its summary wants all four policies' logs), after writing every per-VC log, so
success is judged by those logs being freshly written. See
shared/traces/reference-simulators.md.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("DLSCHED_SHARED", REPO.parent / "shared"))
PHILLY = SHARED / "traces/philly"
TRACE = PHILLY / "reference_run/input_cluster_log_helios_format.csv.gz"
VC_CONFIG = PHILLY / "philly_vc_config.csv"
WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")
PHASES = ("start_up", "load", "simulate", "write")
TARGET = 100.0


def dlsched_command(out_dir: Path) -> list[str]:
    """The command as the README documents it (the `dlsched` script when installed)."""
    script = Path(sys.executable).with_name("dlsched")
    head = [str(script)] if script.exists() else [sys.executable, "-m", "dlsched.cli.main"]
    return head + ["simulate", "--trace", str(TRACE), "--vc-config", str(VC_CONFIG), "--start", WINDOW[0],
                   "--end", WINDOW[1], "--policy", "fifo", "--compat", "helios", "--out", str(out_dir),
                   "--timings"]


def child_env(**extra: str) -> dict[str, str]:
    """The environment of a measured command: bytecode caching on, as on an installed system
    (some sandboxes set PYTHONDONTWRITEBYTECODE, which recompiles every module at each start)."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env.update(extra)
    return env


def child_cpu() -> float:
    """User + system CPU seconds of the finished children so far (a shared machine's load
    stretches wall time far more than CPU time; both are printed)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_dlsched(out_dir: Path) -> tuple[float, dict, float]:
    """Wall seconds of one whole command (outside clock), its own --timings breakdown and its CPU seconds."""
    env = child_env(PYTHONPATH=os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]))
    cpu = child_cpu()
    start = time.perf_counter()
    res = subprocess.run(dlsched_command(out_dir), env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    cpu = child_cpu() - cpu
    if res.returncode != 0:
        sys.exit(f"dlsched failed (exit {res.returncode}):\n{res.stderr[-2000:]}")
    summary = json.loads((out_dir / "summary.json").read_text())
    return wall, summary, cpu


def reference_location(args: argparse.Namespace) -> tuple[Path | None, Path | None, str]:
    """(QSSF Service folder, its python) or Nones with the reason it is not available."""
    if args.skip_reference:
        return None, None, "skipped (--skip-reference)"
    folder = args.reference_dir or os.environ.get("DLSCHED_REFERENCE_DIR")
    if not folder:
        return None, None, "no --reference-dir / DLSCHED_REFERENCE_DIR given"
    folder = Path(folder)
    needed = [folder / "simulator.py", folder / "data/Philly/cluster_log.csv",
              folder / "data/Philly/vc_dict_homo.pkl", folder / "estimators/Philly_lgb.csv"]
    missing = [str(p) for p in needed if not p.exists()]
    if missing:
        return None, None, f"not prepared ({', '.join(missing)} missing; see this file's docstring)"
    python = args.reference_python or os.environ.get("DLSCHED_REFERENCE_PYTHON")
    if python is None:
        candidates = [p / name / "bin/python" for p in (folder, *folder.parents) for name in ("venv", ".venv")]
        candidates.append(Path("/work/ref-venv/bin/python"))
        python = next((str(c) for c in candidates if c.exists()), None)
    if python is None or not Path(python).exists():
        return None, None, "no Python for it (--reference-python / DLSCHED_REFERENCE_PYTHON)"
    return folder, Path(python), ""


def vc_names() -> list[str]:
    with open(VC_CONFIG, newline="") as fh:
        return [row[0] for row in list(csv.reader(fh))[1:] if row]


def run_reference(folder: Path, python: Path) -> tuple[float, float, int, float]:
    """Wall seconds of the reference FIFO run, its average JCT and job count (from its logs), its CPU seconds."""
    logs = [folder / "log/Philly" / vc / f"fifo_consolidate_{vc}_log.csv" for vc in vc_names()]
    started = time.time()
    cpu = child_cpu()
    start = time.perf_counter()
    res = subprocess.run([str(python), "simulator.py", "-e=Philly", "-t=./data/Philly", "-s", "fifo"],
                         cwd=folder, env=child_env(TZ="UTC"), capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    cpu = child_cpu() - cpu
    stale = [str(p) for p in logs if not p.exists() or p.stat().st_mtime < started - 1]
    if stale:  # exit 1 alone is the known end-of-run bug; missing logs are a real failure
        sys.exit(f"reference run failed (exit {res.returncode}); not written: {stale[:3]}\n{res.stderr[-2000:]}")
    jct_sum, jobs = 0.0, 0
    for path in logs:
        with open(path, newline="") as fh:
            for row in csv.DictReader(fh):
                jct_sum += float(row["jct"])
                jobs += 1
    return wall, jct_sum / max(jobs, 1), jobs, cpu


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="dlsched runs (the median is compared)")
    ap.add_argument("--reference-dir", type=Path, default=None, help="prepared 'framework/QSSF Service' folder")
    ap.add_argument("--reference-python", type=Path, default=None, help="the reference's Python 3.11")
    ap.add_argument("--skip-reference", action="store_true", help="measure dlsched only")
    args = ap.parse_args()
    if not TRACE.exists():
        sys.exit(f"{TRACE} not found (../shared is needed)")

    folder, python, why = reference_location(args)
    ref = None
    runs = []
    n = max(1, args.runs)
    # dlsched runs on both sides of the reference, so a load that changes during the minutes the
    # reference takes weighs on both (a ratio of a loaded reference to a quiet dlsched flatters)
    with tempfile.TemporaryDirectory() as tmp:
        run_dlsched(Path(tmp) / "warm-up")  # not counted: writes the bytecode caches, warms the page cache
        before = n // 2 if folder is not None else n
        load0 = os.getloadavg()[0]
        for i in range(before):
            runs.append(run_dlsched(Path(tmp) / f"run{i}"))
        if folder is None:
            print(f"reference not available: {why}")
        else:
            print(f"reference: HeliosArtifact QSSF Service, FIFO, in {folder} ... ", end="", flush=True)
            ref_load0 = os.getloadavg()[0]
            ref = run_reference(folder, python)
            print(f"{ref[0]:.1f} s wall, {ref[3]:.1f} s CPU ({ref[2]:,} jobs, average JCT {ref[1]:,.2f} s; "
                  f"1-min load average {ref_load0:.1f} at its start, {os.getloadavg()[0]:.1f} at its end)")
        for i in range(before, n):
            runs.append(run_dlsched(Path(tmp) / f"run{i}"))
        where = f"{before} before the reference, {n - before} after; " if folder is not None else ""
        print(f"dlsched runs: {where}1-min load average {load0:.1f} at the first, "
              f"{os.getloadavg()[0]:.1f} after the last")
    runs.sort(key=lambda r: r[0])
    wall, summary, _ = runs[len(runs) // 2]
    cpu = statistics.median(r[2] for r in runs)
    timings = summary["timings"]
    print(f"dlsched simulate --policy fifo --compat helios (whole command, {len(runs)} runs after a warm-up): median "
          f"{wall:.2f} s wall, best {runs[0][0]:.2f} s, median {cpu:.2f} s CPU ({summary['jobs']:,} jobs, "
          f"average JCT {summary['avg_jct']:,.2f} s)")
    parts = [f"{p.replace('_', '-')} {timings[p]:.2f} s" for p in PHASES]
    parts.append(f"interpreter start + exit {max(0.0, wall - timings['total']):.2f} s")
    print("  where the time goes: " + " | ".join(parts))
    spread = [r[0] for r in runs]
    if len(spread) > 1:
        print(f"  runs: {', '.join(f'{w:.2f}' for w in spread)} s (stdev {statistics.pstdev(spread):.2f} s)")
    if ref is not None:
        ratio = ref[0] / wall
        verdict = "meets" if ratio >= TARGET else "MISSES"
        print(f"ratio: {ratio:,.0f}x the reference's FIFO time (best run {ref[0] / runs[0][0]:,.0f}x; "
              f"CPU time {ref[3] / cpu:,.0f}x); {verdict} the >= {TARGET:.0f}x target")


if __name__ == "__main__":
    main()
