"""Peak memory and wall time of the whole `dlsched simulate --jobs N --policy P` command, old code
beside new in one run.

Each run is a fresh subprocess (start-up, generating the built-in workload, simulating, writing
jobs.csv/timeline.csv/summary.json); its peak resident set comes from the kernel's accounting
of that child alone (``os.wait4``), its wall time from the outside clock. The old code is a
``src`` folder (``--baseline-src PATH``) or a temporary ``git worktree`` of ``--baseline-ref``
(default: where this branch left ``main``, ``git merge-base HEAD main``), removed afterwards. Runs alternate old, new, old, new...
so that the neighbours' load falls on both; the best of ``--runs`` is printed per code, and
whether the two wrote the same files (summary.json compared without its timings).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_memory.py [--jobs 1000000] [--policy fifo]
        [--runs 2] [--baseline-src PATH | --baseline-ref REF] [--trace-rows N]

``--trace-rows N`` measures a trace file instead of the built-in workload: a CSV of ``N`` rows with
user and name columns (the Helios layout), written under a temporary folder from the Philly reference
window (``shared/traces/philly``) repeated with its times shifted by the window's span and each copy's
job names suffixed, so every copy offers the window's load again and every id stays unique; the
command is ``simulate --trace FILE --vc-config philly_vc_config.csv``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NEW_SRC = ROOT / "src"
SHARED = Path(os.environ.get("DLSCHED_SHARED", ROOT.parent / "shared"))
PHILLY = SHARED / "traces/philly"
PHILLY_TRACE = PHILLY / "reference_run/input_cluster_log_helios_format.csv.gz"
PHILLY_VCS = PHILLY / "philly_vc_config.csv"
WINDOW = ("2017-10-01 00:00:00", "2017-11-30 23:59:00")


def simulate_command(jobs: int, policy: str, out_dir: Path, trace: Path | None = None) -> list[str]:
    """The command a user types, through the interpreter running this benchmark."""
    workload = ["--jobs", str(jobs)] if trace is None else ["--trace", str(trace), "--vc-config", str(PHILLY_VCS)]
    return [sys.executable, "-c", "from dlsched.cli.main import app; app()", "simulate", *workload,
            "--policy", policy, "--out", str(out_dir)]


def make_trace(rows: int, path: Path) -> int:
    """Write ``rows`` rows of the Philly window, repeated with shifted times, as a Helios-layout CSV
    (no quotes, so dlsched reads it with its fast reader); returns the copies used."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    if not PHILLY_TRACE.exists():
        fail(f"--trace-rows: {PHILLY_TRACE} not found (the shared traces are needed)")
    stamp = pa.timestamp("s")
    table = pcsv.read_csv(PHILLY_TRACE, convert_options=pcsv.ConvertOptions(column_types={
        "submit_time": stamp, "start_time": stamp, "end_time": stamp}))
    lo, hi = (pa.scalar(w).cast(stamp) for w in WINDOW)
    table = table.filter(pc.and_(pc.greater_equal(table["submit_time"], lo), pc.less_equal(table["submit_time"], hi)))
    span = hi.value - lo.value + 60  # seconds: the next copy starts a minute after the window ends
    copies = -(-rows // table.num_rows)
    parts = []
    for k in range(copies):
        shift = pa.scalar(span * k, pa.duration("s"))
        part = table.set_column(table.column_names.index("jobname"), "jobname",
                                pc.binary_join_element_wise(table["jobname"], f"k{k}", "-"))
        for col in ("submit_time", "start_time", "end_time"):
            part = part.set_column(part.column_names.index(col), col, pc.add(part[col], shift))
        parts.append(part)
    big = pa.concat_tables(parts).slice(0, rows)
    with open(path, "wb") as fh:  # the header by hand: pyarrow quotes it whatever the quoting style
        fh.write((",".join(big.column_names) + "\n").encode())
        pcsv.write_csv(big, fh, pcsv.WriteOptions(include_header=False, quoting_style="none"))
    return copies


def fail(message: str) -> None:
    """One ``error:`` line and exit code 2, as the CLI does for bad input."""
    print(f"error: {message}", file=sys.stderr)
    raise SystemExit(2)


def merge_base() -> str:
    """The commit where this branch left ``main`` (the old code by default)."""
    got = subprocess.run(["git", "-C", str(ROOT), "merge-base", "HEAD", "main"], capture_output=True, text=True,
                         check=False)
    if got.returncode != 0:
        fail("no --baseline-src or --baseline-ref given, and `git merge-base HEAD main` failed: "
             + (got.stderr.strip() or "not a git checkout"))
    return got.stdout.strip()


def run_once(src: Path, jobs: int, policy: str, out_dir: Path, trace: Path | None = None) -> tuple[float, float, float]:
    """(peak RSS in MiB, wall seconds, CPU seconds) of one command run against the sources in
    ``src``. CPU time (user + system) is what the neighbours on a shared machine stretch least."""
    env = {**os.environ, "PYTHONPATH": str(src), "OMP_NUM_THREADS": "1"}
    t0 = time.perf_counter()
    child = subprocess.Popen(simulate_command(jobs, policy, out_dir, trace), env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
    _, status, usage = os.wait4(child.pid, 0)  # this child's own peak, not the largest child's so far
    wall = time.perf_counter() - t0
    child.returncode = os.waitstatus_to_exitcode(status)
    err = child.stderr.read().decode(errors="replace") if child.stderr else ""
    if child.returncode != 0:
        fail(f"the command failed under {src} (exit {child.returncode}): {err.strip()[-400:]}")
    return usage.ru_maxrss / 1024, wall, usage.ru_utime + usage.ru_stime  # Linux reports kilobytes


@contextmanager
def baseline_sources(src: str | None, ref: str):
    """The old code's ``src`` folder: the one given, or a temporary worktree of ``ref``."""
    if src is not None:
        path = Path(src)
        if not (path / "dlsched" / "cli" / "main.py").is_file():
            fail(f"--baseline-src {src}: no dlsched package there (want the folder holding dlsched/)")
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="bench-memory-") as tmp:
        tree = Path(tmp) / "baseline"
        made = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), ref],
                              capture_output=True, text=True, check=False)
        if made.returncode != 0:
            fail(f"--baseline-ref {ref}: {made.stderr.strip() or 'git worktree add failed'}")
        try:
            yield tree / "src"
        finally:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                           capture_output=True, check=False)


def same_outputs(a: Path, b: Path) -> bool:
    """Whether two run directories hold the same jobs.csv, timeline.csv and summary (timings aside)."""
    for name in ("jobs.csv", "timeline.csv"):
        if (a / name).read_bytes() != (b / name).read_bytes():
            return False
    sa, sb = (json.loads((d / "summary.json").read_text()) for d in (a, b))
    sa.pop("timings", None)
    sb.pop("timings", None)
    return sa == sb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--jobs", type=int, default=1_000_000)
    ap.add_argument("--policy", default="fifo")
    ap.add_argument("--trace-rows", type=int, default=0,
                    help="measure a Helios-layout CSV trace of this many rows (the Philly window repeated)")
    ap.add_argument("--runs", type=int, default=2, help="runs per code, alternating (best of them is printed)")
    ap.add_argument("--baseline-src", default=None, help="the old code's src folder")
    ap.add_argument("--baseline-ref", default=None,
                    help="git ref of the old code when no --baseline-src (default: git merge-base HEAD main)")
    args = ap.parse_args()
    if args.jobs < 1 or args.runs < 1 or args.trace_rows < 0:
        fail(f"--jobs {args.jobs} / --runs {args.runs} / --trace-rows {args.trace_rows}: "
             "jobs and runs must be at least 1, trace rows at least 0")
    ref = args.baseline_ref or merge_base()
    with baseline_sources(args.baseline_src, ref) as old_src, \
            tempfile.TemporaryDirectory(prefix="bench-memory-out-") as out:
        trace = None
        if args.trace_rows:
            trace = Path(out) / "trace.csv"
            copies = make_trace(args.trace_rows, trace)
            print(f"trace: {args.trace_rows:,} rows ({copies} shifted copies of the Philly window), "
                  f"{trace.stat().st_size / 2**20:,.0f} MiB", flush=True)
        results: dict[str, list[tuple[float, float, float]]] = {"old": [], "new": []}
        for run in range(args.runs):
            for label, src in (("old", old_src), ("new", NEW_SRC)):
                peak, wall, cpu = run_once(src, args.jobs, args.policy, Path(out) / label, trace)
                results[label].append((peak, wall, cpu))
                print(f"run {run + 1} {label}: peak {peak:,.0f} MiB, wall {wall:.2f} s, CPU {cpu:.2f} s", flush=True)
        same = same_outputs(Path(out) / "old", Path(out) / "new")
    load = os.getloadavg()[0]
    what = f"--jobs {args.jobs:,}" if not args.trace_rows else f"--trace <{args.trace_rows:,} rows>"
    print(f"\n`dlsched simulate {what} --policy {args.policy}`, best of {args.runs} "
          f"(1-min load average at the end {load:.1f}):")
    print(f"{'code':<6}{'peak RSS':>12}{'wall':>10}{'CPU':>10}")
    best = {k: tuple(min(r[i] for r in v) for i in range(3)) for k, v in results.items()}
    for label in ("old", "new"):
        peak, wall, cpu = best[label]
        print(f"{label:<6}{peak:>8,.0f} MiB{wall:>9.2f} s{cpu:>8.2f} s")
    (op, ow, oc), (np_, nw, nc) = best["old"], best["new"]
    print(f"new/old: memory {np_ / op:.2f}x, wall {nw / ow:.2f}x, CPU {nc / oc:.2f}x; "
          f"same output files: {'yes' if same else 'NO'}")


if __name__ == "__main__":
    main()
