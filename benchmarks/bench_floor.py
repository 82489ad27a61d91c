"""The whole `simulate --policy fifo --compat helios` command beside its bare-Python floor.

The floor is the least work a Python program can do for the same result: read the Philly reference
window's trace with pyarrow, run FIFO (head of line per VC, no backfill) over a heap of finish
times with the reference's consolidate placement (best fit within one node; whole free nodes,
lowest first, for a multiple of a node; whole nodes plus the remainder on the remaining node with
the most free GPUs otherwise), and write jobs.csv with pyarrow. It keeps no job objects, no
timeline, no summary and no validation: what is left between dlsched and it is the price of those
(and of the kernel, the policy interface and the checks every other run needs).

The floor runs as a child process like dlsched (its own interpreter start-up included), and its
jobs.csv is checked against dlsched's job for job (same ids in the same order, same start and end
times to the bit); a mismatch exits 1. Printed: wall and CPU seconds of both whole commands, the
phases of both (start-up, load, simulate, write: wall, from inside), and with `--reference-dir` the
HeliosArtifact simulator's FIFO in the same run (prepared as `bench_whole_command.py` describes).

    PYTHONPATH=src OMP_NUM_THREADS=1 .venv/bin/python benchmarks/bench_floor.py [--runs 3]
        [--reference-dir DIR] [--reference-python PY] [--baseline-src PATH]

`--baseline-src` also times the dlsched of another source tree (e.g. a worktree of main) in the
same run, alternating with this one. `--bytecodes N` instead counts the Python bytecodes of the
simulation alone on the window's first N jobs, dlsched's loop (as `bench_bytecodes.py` counts it)
beside the floor's, with their start times compared: a measure of the loop's per-event overhead that
a loaded machine does not blur.
"""

from __future__ import annotations

import time

STARTED = time.perf_counter()

import argparse  # noqa: E402  (the floor child times its own imports)
import heapq  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
from pathlib import Path  # noqa: E402

HERE = Path(__file__).resolve().parent
PHASES = ("start_up", "load", "simulate", "write")
GPUS_PER_NODE = 8  # Philly's nodes (the VC config gives node counts)


def floor_load(trace: Path, vc_config: Path, start: str, end: str):
    """Columns of the window's jobs in submit order (stable), times in seconds from the first."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pcsv

    names = pa.dictionary(pa.int32(), pa.string())
    table = pcsv.read_csv(trace, convert_options=pcsv.ConvertOptions(
        include_columns=["user", "vc", "jobname", "gpu_num", "submit_time", "duration"],
        column_types={"user": names, "vc": names, "jobname": pa.string(), "gpu_num": pa.int64(),
                      "submit_time": pa.timestamp("s"), "duration": pa.float64()}))
    lo, hi = pa.scalar(start).cast(pa.timestamp("s")), pa.scalar(end).cast(pa.timestamp("s"))
    submit = table["submit_time"]
    table = table.filter(pc.and_(pc.greater_equal(submit, lo), pc.less_equal(submit, hi)))
    seconds = pc.cast(table["submit_time"], pa.int64()).to_numpy()
    seconds = seconds - seconds.min()
    order = seconds.argsort(kind="stable")
    table = table.take(order)
    with open(vc_config) as fh:
        nodes = {vc: int(n) for vc, n in (line.strip().split(",") for line in fh.readlines()[1:] if line.strip())}
    return table, seconds[order].astype(float).tolist(), nodes


def floor_fifo(vcs: list[str], gpus: list[int], submit: list[float], duration: list[float],
               nodes: dict[str, int]) -> list[float]:
    """Start times of every job: FIFO per VC, consolidate placement, one heap of finishes."""
    per = GPUS_PER_NODE
    full_mask = per  # bucket index of a wholly free node
    buckets = {vc: [0] * per + [(1 << n) - 1] for vc, n in nodes.items()}  # free count -> node bits
    free = {vc: [per] * n for vc, n in nodes.items()}
    spare = {vc: per * n for vc, n in nodes.items()}
    queues: dict[str, list[int]] = {vc: [] for vc in nodes}
    heads = dict.fromkeys(nodes, 0)
    start = [0.0] * len(submit)
    held: list[list[tuple[int, int]]] = [[]] * len(submit)
    finishes: list[tuple[float, int]] = []
    n, i = len(submit), 0
    inf = float("inf")

    def take(vc: str, node: int, k: int) -> None:
        f = free[vc]
        b = buckets[vc]
        bit = 1 << node
        b[f[node]] ^= bit
        f[node] -= k
        b[f[node]] ^= bit

    def place(vc: str, need: int) -> list[tuple[int, int]] | None:
        if spare[vc] < need:
            return None
        b = buckets[vc]
        if need <= per:
            for k in range(need, per + 1):
                if b[k]:
                    return [((b[k] & -b[k]).bit_length() - 1, need)]
            return None
        whole, rest = divmod(need, per)
        full = b[full_mask]
        if full.bit_count() < whole:
            return None
        out = []
        for _ in range(whole):
            low = full & -full
            full ^= low
            out.append((low.bit_length() - 1, per))
        if rest:
            if full:
                out.append(((full & -full).bit_length() - 1, rest))
            else:
                for k in range(per - 1, rest - 1, -1):
                    if b[k]:
                        out.append(((b[k] & -b[k]).bit_length() - 1, rest))
                        break
                else:
                    return None
        return out

    while i < n or finishes:
        t = min(submit[i] if i < n else inf, finishes[0][0] if finishes else inf)
        touched = set()
        while finishes and finishes[0][0] == t:
            _, j = heapq.heappop(finishes)
            vc = vcs[j]
            for node, k in held[j]:
                take(vc, node, -k)
            spare[vc] += gpus[j]
            touched.add(vc)
        while i < n and submit[i] == t:
            queues[vcs[i]].append(i)
            touched.add(vcs[i])
            i += 1
        for vc in touched:
            q, h = queues[vc], heads[vc]
            while h < len(q):
                j = q[h]
                got = place(vc, gpus[j])
                if got is None:
                    break
                for node, k in got:
                    take(vc, node, k)
                spare[vc] -= gpus[j]
                held[j] = got
                start[j] = t
                heapq.heappush(finishes, (t + duration[j], j))
                h += 1
            heads[vc] = h
    return start


def floor_child(trace: Path, vc_config: Path, window: tuple[str, str], out: Path) -> None:
    """The floor as one command: read, simulate, write; prints its phases as JSON."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.csv as pcsv

    phases = {"start_up": time.perf_counter() - STARTED}
    mark = time.perf_counter()
    table, submit, nodes = floor_load(trace, vc_config, *window)
    vcs = table["vc"].cast(pa.string()).to_pylist()
    gpus = table["gpu_num"].to_pylist()
    duration = table["duration"].to_pylist()
    now = time.perf_counter()
    phases["load"], mark = now - mark, now
    start = floor_fifo(vcs, gpus, submit, duration, nodes)
    now = time.perf_counter()
    phases["simulate"], mark = now - mark, now
    sub, st, du = np.array(submit), np.array(start), np.array(duration)
    out.mkdir(parents=True, exist_ok=True)
    name = table["jobname"]
    pcsv.write_csv(pa.table({
        "job_id": name, "user": table["user"].cast(pa.string()), "name": name, "vc": vcs, "gpus": table["gpu_num"],
        "submit_time": sub, "duration": du, "start_time": st, "end_time": st + du, "queue_delay": st - sub,
        "jct": st + du - sub, "preemptions": np.zeros(len(st), dtype=np.int64)}), out / "jobs.csv")
    phases["write"] = time.perf_counter() - mark
    print(json.dumps(phases))


def child_cpu() -> float:
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """Wall and CPU seconds of one child command, and its stdout."""
    cpu = child_cpu()
    t0 = time.perf_counter()
    res = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - t0
    if res.returncode != 0:
        sys.exit(f"{cmd[:3]} failed (exit {res.returncode}):\n{res.stderr[-2000:]}")
    return wall, child_cpu() - cpu, res.stdout


def same_jobs(dlsched_csv: Path, floor_csv: Path) -> str:
    """'' when both jobs.csv hold the same jobs in the same order with the same numbers, else why not."""
    import numpy as np
    import pyarrow.csv as pcsv

    a, b = pcsv.read_csv(dlsched_csv), pcsv.read_csv(floor_csv)
    if a.num_rows != b.num_rows:
        return f"{a.num_rows} jobs against {b.num_rows}"
    for col in a.column_names:
        x, y = a[col].to_numpy(zero_copy_only=False), b[col].to_numpy(zero_copy_only=False)
        if x.dtype.kind == "f" or y.dtype.kind == "f":
            bad = np.flatnonzero(x.astype(float) != y.astype(float))
        else:
            bad = np.flatnonzero(x.astype(str) != y.astype(str))
        if len(bad):
            r = int(bad[0])
            return f"column {col}: {len(bad)} rows differ, first row {r + 1}: {x[r]!r} against {y[r]!r}"
    return ""


def bytecodes(n: int) -> None:
    """Print the bytecodes of dlsched's simulation and of the floor's on the first ``n`` jobs."""
    import bench_bytecodes as bb
    import bench_whole_command as whole

    from dlsched.core import truth
    from dlsched.core.cluster import ClusterSpec
    from dlsched.traces.api import load_trace
    from dlsched.traces.vc import load_vc_config

    vcs = load_vc_config(whole.VC_CONFIG)
    jobs = load_trace(whole.TRACE, "helios-log", start=whole.WINDOW[0], end=whole.WINDOW[1], vcs=list(vcs)).jobs[:n]
    ours = bb.count(jobs, ClusterSpec.from_vc_sizes(vcs), "fifo")
    starts = [job.start_time for job in jobs]
    columns = ([j.vc for j in jobs], [j.gpus for j in jobs], [j.submit_time for j in jobs],
               [truth.duration(j) for j in jobs], dict(vcs))
    floor, floor_codes = bb.traced(floor_fifo, *columns)
    if floor != starts:
        sys.exit("the floor's start times differ from dlsched's")
    print(f"simulation of the first {len(jobs):,} jobs (same start times): dlsched {ours:,} bytecodes "
          f"({ours / len(jobs):,.0f} per job), floor {floor_codes:,} ({floor_codes / len(jobs):,.0f} per job): "
          f"{ours / floor_codes:.2f}x")


def main() -> None:
    if sys.argv[1:2] == ["--floor-child"]:  # the floor itself: out, trace, VC config, start, end
        out, trace, vc_config, start, end = sys.argv[2:7]
        floor_child(Path(trace), Path(vc_config), (start, end), Path(out))
        return
    sys.path.insert(0, str(HERE))
    import bench_whole_command as whole

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs of each command (medians are compared)")
    ap.add_argument("--reference-dir", type=Path, default=None, help="prepared 'framework/QSSF Service' folder")
    ap.add_argument("--reference-python", type=Path, default=None, help="the reference's Python 3.11")
    ap.add_argument("--baseline-src", type=Path, default=None, help="another tree's src/ to time beside this one")
    ap.add_argument("--bytecodes", type=int, default=0, metavar="N",
                    help="count the simulation's bytecodes on the first N jobs instead of timing")
    args = ap.parse_args()
    if not whole.TRACE.exists():
        sys.exit(f"{whole.TRACE} not found (../shared is needed)")
    if args.bytecodes:
        bytecodes(args.bytecodes)
        return
    args.skip_reference = False
    folder, python, why = whole.reference_location(args)
    trees = {"dlsched": whole.REPO / "src"}
    if args.baseline_src is not None:
        trees = {"baseline": args.baseline_src.resolve(), **trees}
    results: dict[str, list[tuple[float, float, dict]]] = {name: [] for name in (*trees, "floor")}
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        floor_cmd = [sys.executable, str(Path(__file__).resolve()), "--floor-child"]
        env = whole.child_env(OMP_NUM_THREADS="1")
        for rnd in range(max(1, args.runs) + 1):  # round 0 warms caches and is not counted
            for name, src in trees.items():
                out = tmp / f"{name}{rnd}"
                wall, cpu, _ = timed(whole.dlsched_command(out), {**env, "PYTHONPATH": str(src)})
                timings = json.loads((out / "summary.json").read_text())["timings"]
                if rnd:
                    results[name].append((wall, cpu, timings))
            out = tmp / f"floor{rnd}"
            wall, cpu, stdout = timed(floor_cmd + [str(out), str(whole.TRACE), str(whole.VC_CONFIG), *whole.WINDOW], env)
            if rnd:
                results["floor"].append((wall, cpu, json.loads(stdout.strip().splitlines()[-1])))
            else:
                why_not = same_jobs(tmp / "dlsched0" / "jobs.csv", out / "jobs.csv")
                if why_not:
                    print(f"the floor's jobs.csv differs from dlsched's: {why_not}")
                    sys.exit(1)
                print("jobs.csv: the floor's and dlsched's hold the same jobs, start and end times")
        ref = None
        if folder is not None:
            ref = whole.run_reference(folder, python)
    floor_wall = statistics.median(r[0] for r in results["floor"])
    floor_cpu = statistics.median(r[1] for r in results["floor"])
    print(f"{max(1, args.runs)} runs each after a warm-up, 1-min load average {os.getloadavg()[0]:.1f}")
    print(f"{'command':<10} {'wall s':>7} {'CPU s':>7} {'x floor':>8}  " + "  ".join(f"{p:>9}" for p in PHASES))
    for name, runs in results.items():
        wall = statistics.median(r[0] for r in runs)
        cpu = statistics.median(r[1] for r in runs)
        phases = "  ".join(f"{statistics.median(r[2][p] for r in runs):>9.3f}" for p in PHASES)
        print(f"{name:<10} {wall:>7.3f} {cpu:>7.3f} {wall / floor_wall:>5.2f}/{cpu / floor_cpu:<4.2f} {phases}")
    if ref is not None:
        print(f"reference  {ref[0]:>7.1f} {ref[3]:>7.1f} (HeliosArtifact FIFO, {ref[2]:,} jobs)")
    elif why:
        print(f"reference not available: {why}")
    print("(x floor: wall/CPU ratio to the floor; phases are wall seconds from inside each command, "
          "interpreter boot and exit excluded)")


if __name__ == "__main__":
    main()
