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
    phases: list[tuple[str, Phase, Phase, Phase | None]] = []
    try:
        make_namespace_and_nodes(cp, args.nodes, args.gpus_per_node)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo", work / "serve.log")
        svc.start()
        print(f"control plane + {args.nodes} nodes x {args.gpus_per_node} GPUs + dlsched serve ready in "
              f"{time.monotonic() - t0:.1f} s; kube-scheduler client qps: {qps or 'default (50)'}"
              f"{f', burst {int(2 * qps)}' if qps else ''}")
        for mode in modes:
            drain = (args.nodes, args.gpus_per_node) if mode == "drain" else None
            base, packed = run_baselines(cp, mode, args, drain)
            gpu = run_phase(cp, f"gpu-{mode}", args.pods, 1, args.timeout, drain, service_pid=svc.proc.pid)
            phases.append((mode, base, gpu, packed))
        state = svc.get("/api/v1/state")
        served = server_times(svc)
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
    for mode, base, gpu, packed in phases:
        count_phase_writes(events, base, gpu, packed)
        print(f"{mode}: {args.pods} pods created at once"
              f"{f', then {args.nodes} new nodes (the old ones cordoned)' if mode == 'drain' else ''}; "
              f"create-to-bind (this process's clock):")
        for label, ph in baseline_rows(args, base, packed) + [("through dlsched (1 GPU each)", gpu)]:
            print(f"  {label:31s} {summary(ph.waits)}   not bound: {ph.left}   {ph.rate:.1f} pods/s   "
                  f"(created in {ph.span:.2f} s)")
        ratio = gpu.rate / base.rate if base.rate else float("nan")
        print(f"  pods/s through dlsched / kube-scheduler alone: {ratio:.2f}x (goal >= 0.75x)")
        if packed is not None:
            print("\n".join(packed_lines(args, base, gpu, packed, "through dlsched")))
        for label, ph in baseline_rows(args, base, packed) + [("through dlsched", gpu)]:
            print(attempt_line(ph, label))
        print(f"  API writes per bound pod: dlsched {gpu.per_pod('dlsched'):.2f} (goal <= 1.2; "
              f"{gpu.writes.get('dlsched', 0)} writes, {gpu.refused} refused) + kube-scheduler "
              f"{gpu.per_pod('kube-scheduler'):.2f}; kube-scheduler alone: {base.per_pod('kube-scheduler'):.2f}")
        print(f"  dlsched's writes: {', '.join(f'{k} {n}' for k, n in sorted(gpu.kinds.items())) or 'none'}")
        print(f"  dlsched's CPU per bound pod (its process, the phase's start to its last bind): "
              f"{gpu.cpu_ms_per_pod():.1f} ms")
        ok = ok and all_bound(base, gpu, packed)
    print(f"  dlsched: binds {state['binds']}, counters {state['counters']}")
    print(f"  dlsched's own time per extender call (mean, from /metrics): {served}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
