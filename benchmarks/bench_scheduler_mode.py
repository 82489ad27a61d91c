"""``dlsched serve --mode scheduler`` against kube-scheduler alone, in the same run on the same
real control plane (issue 34, point 4).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_scheduler_mode.py [--pods 500] [--nodes 100]
        [--gpus-per-node 8] [--scheduler-qps 1000] [--modes burst,drain] [--timeout 180]

etcd + kube-apiserver + kube-scheduler v1.20.2 from ``../shared/k8s`` (loopback, free ports,
stopped by PID; kube-scheduler at ``--scheduler-qps``, its client rate raised as a tuned cluster
has it) with ``--nodes`` kubelet-less nodes of ``--gpus-per-node`` GPUs, and ``dlsched serve
--mode scheduler --policy fifo`` (a child process, SQLite store in a temporary directory). Each
phase creates ``--pods`` pods at once (8 client threads) and times each from its create's answer
to the watch showing its ``spec.nodeName``, on this process's clock. kube-scheduler alone's pods
request no GPU (kube-scheduler's config names an extender for ``nvidia.com/gpu``, which is not
listening here); dlsched's pods request one GPU each and name ``schedulerName: dlsched``. Modes:
*burst* (pods created onto free nodes) and *drain* (every node there cordoned, the pods created
and tried, then ``--nodes`` new nodes added at once). A drain also runs kube-scheduler alone on pods
that request ``64/--gpus-per-node`` CPUs each, so that as few fit a new node as dlsched's one-GPU
pods (8, against 110 GPU-less pods): the like-for-like ratio, since a drain's pods/s is bounded by
the node adds that give its last pod room (printed: after 5 adds for GPU-less pods, 63 for
one-GPU pods). Prints per phase median / p95 / max
create-to-bind, pods/s, dlsched's pods/s and p50 over kube-scheduler alone's, and the API writes
per bound pod by kind from the audit log, and dlsched's own steps per bind (watch event ->
nomination -> bind worker -> node check -> Binding answered; ``stages`` of the state's ``mode``
block, its last 500 binds: one phase's at the default ``--pods``). Exit 1 when a pod was not bound within ``--timeout``;
skips (exit 0, with the reason) when the control plane cannot start here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))
sys.path.insert(0, str(ROOT.parent / "tests"))
sys.path.insert(0, str(ROOT))

from k8s_phases import (  # noqa: E402
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


def report(mode: str, args, base: Phase, mine: Phase, packed: Phase | None = None) -> list[str]:
    """The lines of one mode: the schedulers, the ratios, the writes (``packed``: the drain's
    kube-scheduler alone with as many pods a node as dlsched's, :func:`run_baselines`)."""
    head = (f"{mode}: {args.pods} pods created at once"
            f"{f', then {args.nodes} new nodes (the old ones cordoned)' if mode == 'drain' else ''}; create-to-bind:")
    lines = [head]
    for label, ph in baseline_rows(args, base, packed) + [("dlsched --mode scheduler (1 GPU)", mine)]:
        lines.append(f"  {label:33s} {summary(ph.waits)}   not bound: {ph.left}   {ph.rate:.1f} pods/s   "
                     f"(created in {ph.span:.2f} s)")
    ratio = mine.rate / base.rate if base.rate else float("nan")
    p50 = (statistics.median(mine.waits) / statistics.median(base.waits)
           if mine.waits and base.waits else float("nan"))
    lines.append(f"  pods/s dlsched / kube-scheduler alone: {ratio:.2f}x (goal >= 1.0x); "
                 f"create->bind p50 ratio: {p50:.2f}x (goal <= 2x)")
    if packed is not None:
        lines += packed_lines(args, base, mine, packed)
    lines += [attempt_line(ph, label) for label, ph in baseline_rows(args, base, packed)]
    lines.append(f"  API writes per bound pod: dlsched {mine.per_pod('dlsched'):.2f} ({mine.writes.get('dlsched', 0)} "
                 f"writes, {mine.refused} refused); kube-scheduler alone {base.per_pod('kube-scheduler'):.2f}")
    lines.append(f"  dlsched's writes: {', '.join(f'{k} {n}' for k, n in sorted(mine.kinds.items())) or 'none'}")
    lines.append(f"  dlsched's CPU per bound pod (its process, the phase's start to its last bind): "
                 f"{mine.cpu_ms_per_pod():.1f} ms")
    return lines


def stage_line(stages: dict) -> str:
    """dlsched's steps per bind (service/scheduler_mode/stages.py), median / p95 in ms."""
    steps = [f"{k} {v['p50_ms']:.1f}/{v['p95_ms']:.1f}" for k, v in stages.items() if isinstance(v, dict)]
    return (f"  dlsched's steps over its last {stages.get('binds', 0)} binds, p50/p95 ms: "
            f"{'; '.join(steps) or 'none'}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    phase_options(ap, ROOT.parent.parent / "shared")
    args = ap.parse_args(argv)
    error = check_args(args)
    if error:
        print(error, file=sys.stderr)
        return 2
    reason = missing_reason(args.shared / "k8s")
    if reason:
        print(f"skipped: {reason}")
        return 0
    modes = modes_of(args)
    qps = args.scheduler_qps or None
    t0 = time.monotonic()
    # kube-scheduler's extender URL: a port where nothing listens (dlsched answers no extender call)
    cp = start_control_plane(args.shared / "k8s", f"http://127.0.0.1:{free_port()}/scheduler", qps=qps, audit=True)
    work = Path(tempfile.mkdtemp(prefix="dlsched-bench-schedmode-"))
    svc = None
    finished = False
    phases: list[tuple[str, Phase, Phase, Phase | None]] = []
    stages: dict[str, dict] = {}
    try:
        make_namespace_and_nodes(cp, args.nodes, args.gpus_per_node)
        svc = ServiceProcess(free_port(), cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo",
                             work / "serve.log", extra=("--mode", "scheduler"))
        svc.start()
        print(f"control plane + {args.nodes} nodes x {args.gpus_per_node} GPUs + dlsched serve --mode scheduler "
              f"ready in {time.monotonic() - t0:.1f} s; kube-scheduler client qps: {qps or 'default (50)'}")
        for mode in modes:
            drain = (args.nodes, args.gpus_per_node) if mode == "drain" else None
            base, packed = run_baselines(cp, mode, args, drain)
            mine = run_phase(cp, f"gpu-{mode}", args.pods, 1, args.timeout, drain, scheduler="dlsched",
                             service_pid=svc.proc.pid)
            phases.append((mode, base, mine, packed))
            stages[mode] = svc.get("/api/v1/state")["mode"]["stages"]   # the last binds: this phase's
        state = svc.get("/api/v1/state")
        finished = True
    finally:
        if svc is not None:
            svc.stop()
        events = audit_writes(cp)
        cleanup(cp)
        remove_work(work, finished)
    ok = True
    for mode, base, mine, packed in phases:
        count_phase_writes(events, base, mine, packed)
        print("\n".join(report(mode, args, base, mine, packed)))
        print(stage_line(stages.get(mode) or {}))
        ok = ok and all_bound(base, mine, packed)
    print(f"  dlsched: binds {state['binds']}, scheduler mode {state['mode']}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
