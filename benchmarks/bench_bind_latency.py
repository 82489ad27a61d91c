"""Create-to-bind latency through the real kube-scheduler: a burst of one-GPU pods scheduled via
dlsched's extender, beside the same burst of pods without GPUs that kube-scheduler binds alone,
in the same run on the same control plane.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_bind_latency.py [--pods 500] [--nodes 100]
        [--gpus-per-node 8] [--scheduler-qps 1000] [--modes burst,drain] [--timeout 180]

etcd + kube-apiserver + kube-scheduler v1.20.2 from ``../shared/k8s`` (as the tests start them:
loopback, free ports, stopped by PID) with ``--nodes`` kubelet-less nodes of ``--gpus-per-node``
GPUs, and ``dlsched serve --policy fifo`` (a child process, SQLite store in a temporary
directory) as the extender. Each phase creates ``--pods`` pods at once (8 client threads) and
times each from the API server's answer to its create until a watch of the namespace shows its
``spec.nodeName``; one clock (this process's monotonic clock) for both ends. The baseline phase's
pods request no GPU (they never reach the extender: ``managedResources`` is ``nvidia.com/gpu``),
the dlsched phase's one GPU each; the burst fits in the GPUs, so every wait is the scheduling
path itself, not a wait for free GPUs. The pods of a phase are deleted before the next one.

Two modes, each run for both schedulers in the same run (issue 33, point 5): *burst* (the pods
are created at once onto free nodes) and *drain* (every node there is cordoned, the pods are
created and left to be tried, then ``--nodes`` new nodes are added at once and the pods drain onto
them). Prints, per phase, median / p95 / max create-to-bind in seconds, the pods not bound within
``--timeout`` (a phase stops waiting then), the throughput in pods/s (bound pods over the time from
the first create, or from the nodes' arrival in a drain, to the last bind), dlsched's pods/s over
kube-scheduler alone's, and the API writes per bound pod from the API server's audit log (every
write to the namespace by ``User-Agent``: ``dlsched`` and ``kube-scheduler``). A drain also runs
kube-scheduler alone on pods that request ``64/--gpus-per-node`` CPUs each, so that as few fit a new
node as dlsched's one-GPU pods (8, against 110 GPU-less ones): the like-for-like ratio, since a
drain's pods/s is bounded by the node adds that give its last pod room (printed). ``--scheduler-qps``
sets kube-scheduler's API client rate (burst twice that; 1000 by default, as a tuned cluster has
it: at v1.20's default of 50/s kube-scheduler's own Binding calls are throttled); ``0`` leaves
kube-scheduler's default. Skips with the reason (exit 0) when the control plane cannot start here.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from empty_extender import EmptyExtenderProcess  # noqa: E402
from k8s_phases import (  # noqa: E402 - after the sys.path lines above
    Phase,
    all_bound,
    attempt_line,
    baseline_rows,
    check_args,
    count_phase_writes,
    make_namespace_and_nodes,
    modes_of,
    packed_lines,
    phase_options,
    remove_work,
    run_baselines,
    run_phase,
    summary,
)
from support.control_plane import (  # noqa: E402
    audit_writes,
    cleanup,
    free_port,
    missing_reason,
    start_control_plane,
)
from support.service_proc import ServiceProcess  # noqa: E402

EMPTY_LABEL = "empty extender (1 GPU each)"


def server_times(svc) -> str:
    """Mean milliseconds the service spent per filter / bind call (its latency histograms)."""
    import urllib.request

    with urllib.request.urlopen(svc.url + "/metrics", timeout=10) as resp:
        text = resp.read().decode()
    sums: dict[tuple[str, str], float] = {}
    for line in text.splitlines():
        if line.startswith("dlsched_extender_latency_seconds_") and 'verb="' in line:
            head, _, value = line.rpartition(" ")
            kind = head.split("{")[0].rsplit("_", 1)[1]
            verb = head.split('verb="')[1].split('"')[0]
            if kind in ("sum", "count"):
                sums[(verb, kind)] = float(value)
    parts = []
    for verb in ("filter", "filter_held", "bind"):
        n = sums.get((verb, "count"), 0.0)
        if n:
            parts.append(f"{verb} {1000 * sums[(verb, 'sum')] / n:.1f} ms over {n:.0f} calls"
                         + (f" ({sums[(verb, 'sum')]:.2f} s in all)" if verb == "filter_held" else ""))
    return ", ".join(parts) or "no metrics (prometheus-client not installed)"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    phase_options(ap, ROOT.parent / "shared")
    ap.add_argument("--decisions", type=Path, default=None, help="write dlsched's decision log (JSON) here")
    ap.add_argument("--empty-extender", action="store_true",
                    help="also run each mode's GPU pods through benchmarks/empty_extender.py (no state: it "
                         "passes kube-scheduler's first node) on the extender's port before dlsched, which "
                         "restarts after it: the extender round trip's floor in the same run")
    args = ap.parse_args(argv)
    error = check_args(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    modes = modes_of(args)
    reason = missing_reason(args.shared / "k8s")
    if reason:
        print(f"skipped: {reason}")
        return 0
    qps = args.scheduler_qps or None
    port = free_port()
    t0 = time.monotonic()
    cp = start_control_plane(args.shared / "k8s", f"http://127.0.0.1:{port}/scheduler", cache_capable=True,
                             qps=qps, audit=True)
    work = Path(tempfile.mkdtemp(prefix="dlsched-bench-bind-"))
    svc = None
    finished = False
    phases: list[tuple[str, Phase, Phase, Phase | None, Phase | None]] = []
    served: dict[str, tuple[dict, str]] = {}   # mode -> dlsched's state and call times after its phase

    def service() -> ServiceProcess:
        """dlsched serve on the extender's port, once it reports itself ready (watches synced)."""
        proc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo",
                              work / "serve.log").start()
        deadline = time.monotonic() + 60
        while not proc.get("/api/v1/state")["leadership"]["ready"]:
            if time.monotonic() > deadline:
                raise RuntimeError(f"dlsched serve not ready after 60 s:\n{proc.log()}")
            time.sleep(0.2)
        return proc

    try:
        make_namespace_and_nodes(cp, args.nodes, args.gpus_per_node)
        if not args.empty_extender:
            svc = service()
        print(f"control plane + {args.nodes} nodes x {args.gpus_per_node} GPUs"
              f"{'' if svc is None else ' + dlsched serve'} ready in "
              f"{time.monotonic() - t0:.1f} s; kube-scheduler client qps: {qps or 'default (50)'}"
              f"{f', burst {int(2 * qps)}' if qps else ''}")
        for mode in modes:
            drain = (args.nodes, args.gpus_per_node) if mode == "drain" else None
            base, packed = run_baselines(cp, mode, args, drain)
            empty = None
            if args.empty_extender:   # the extender's port, before dlsched (re)starts on it
                if svc is not None:
                    svc.stop()
                empty = empty_phase(cp, port, mode, args, drain, work)
                svc = service()
            gpu = run_phase(cp, f"gpu-{mode}", args.pods, 1, args.timeout, drain, service_pid=svc.proc.pid)
            phases.append((mode, base, gpu, packed, empty))
            served[mode] = (svc.get("/api/v1/state"), server_times(svc))
        if args.decisions is not None:
            args.decisions.write_text(json.dumps(svc.decisions()))
        finished = True
    finally:
        if svc is not None:
            svc.stop()
        events = audit_writes(cp)
        cleanup(cp)
        remove_work(work, finished)
    ok = True
    for mode, base, gpu, packed, empty in phases:
        count_phase_writes(events, base, gpu, packed, empty)
        print(f"{mode}: {args.pods} pods created at once"
              f"{f', then {args.nodes} new nodes (the old ones cordoned)' if mode == 'drain' else ''}; "
              f"create-to-bind (this process's clock):")
        rows = baseline_rows(args, base, packed) + ([] if empty is None else [(EMPTY_LABEL, empty)])
        for label, ph in rows + [("through dlsched (1 GPU each)", gpu)]:
            print(f"  {label:31s} {summary(ph.waits)}   not bound: {ph.left}   {ph.rate:.1f} pods/s   "
                  f"(created in {ph.span:.2f} s)")
        ratio = gpu.rate / base.rate if base.rate else float("nan")
        print(f"  pods/s through dlsched / kube-scheduler alone: {ratio:.2f}x (goal >= 0.75x)")
        if packed is not None:
            print("\n".join(packed_lines(args, base, gpu, packed, "through dlsched")))
        if empty is not None:
            print("\n".join(empty_lines(base, gpu, packed, empty)))
        for label, ph in rows + [("through dlsched", gpu)]:
            print(attempt_line(ph, label))
        print(f"  API writes per bound pod: dlsched {gpu.per_pod('dlsched'):.2f} (goal <= 1.2; "
              f"{gpu.writes.get('dlsched', 0)} writes, {gpu.refused} refused) + kube-scheduler "
              f"{gpu.per_pod('kube-scheduler'):.2f}; kube-scheduler alone: {base.per_pod('kube-scheduler'):.2f}")
        print(f"  dlsched's writes: {', '.join(f'{k} {n}' for k, n in sorted(gpu.kinds.items())) or 'none'}")
        print(f"  dlsched's CPU per bound pod (its process, the phase's start to its last bind): "
              f"{gpu.cpu_ms_per_pod():.1f} ms"
              + ("" if empty is None else f"; the empty extender's: {empty.cpu_ms_per_pod():.1f} ms"))
        ok = ok and all_bound(base, gpu, packed, empty)
        state, times = served[mode]
        since = " (this mode: the service restarted after the empty extender)" if args.empty_extender else ""
        print(f"  dlsched{since}: binds {state['binds']}, counters {state['counters']}")
        print(f"  dlsched's own time per extender call (mean, from /metrics since it started): {times}")
    return 0 if ok else 1


def empty_phase(cp, port: int, mode: str, args, drain: tuple[int, int] | None, work: Path) -> Phase:
    """The mode's GPU pods through benchmarks/empty_extender.py on the extender's port, stopped by PID."""
    ext = EmptyExtenderProcess(port, cp.api_url, cp.token, work / "empty.log").start()
    try:
        return run_phase(cp, f"empty-{mode}", args.pods, 1, args.timeout, drain, service_pid=ext.proc.pid)
    finally:
        ext.stop()


def empty_lines(base: Phase, gpu: Phase, packed: Phase | None, empty: Phase) -> list[str]:
    """The empty extender beside kube-scheduler alone (as many pods a node in a drain) and dlsched:
    what the extender's round trip itself costs, and what dlsched costs beyond it."""
    alone = packed if packed is not None else base
    over = empty.rate / alone.rate if alone.rate else float("nan")
    mine = gpu.rate / empty.rate if empty.rate else float("nan")
    return [f"  pods/s empty extender / kube-scheduler alone{' (like for like)' if packed else ''}: {over:.2f}x; "
            f"through dlsched / empty extender: {mine:.2f}x"]


if __name__ == "__main__":
    raise SystemExit(main())
