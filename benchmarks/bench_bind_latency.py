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
write to the namespace by ``User-Agent``: ``dlsched`` and ``kube-scheduler``). ``--scheduler-qps``
sets kube-scheduler's API client rate (burst twice that; 1000 by default, as a tuned cluster has
it: at v1.20's default of 50/s kube-scheduler's own Binding calls are throttled); ``0`` leaves
kube-scheduler's default. Skips with the reason (exit 0) when the control plane cannot start here.
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from support.control_plane import (  # noqa: E402 - after the sys.path lines above
    add_gpu_node,
    audit_writes,
    cleanup,
    free_port,
    missing_reason,
    start_control_plane,
)
from support.service_proc import ServiceProcess  # noqa: E402

NAMESPACE = "bench"


class BindWatch:
    """A watch of the namespace's pods: the monotonic time each pod was first seen bound."""

    def __init__(self, api_url: str, token: str, since_rv: str) -> None:
        self.bound: dict[str, float] = {}
        self.lock = threading.Lock()
        self._stop = False
        self._url = urlparse(api_url)
        self._token = token
        self._rv = since_rv
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        while not self._stop:
            try:
                sock = ctx.wrap_socket(socket.create_connection((self._url.hostname, self._url.port), timeout=5))
                path = f"/api/v1/namespaces/{NAMESPACE}/pods?watch=1&resourceVersion={self._rv}"
                sock.sendall((f"GET {path} HTTP/1.1\r\nHost: {self._url.hostname}\r\n"
                              f"Authorization: Bearer {self._token}\r\nConnection: close\r\n\r\n").encode())
                fh = sock.makefile("rb")
                while fh.readline() not in (b"\r\n", b""):
                    pass   # status line and headers
                while not self._stop:
                    size = fh.readline()
                    if not size:
                        break
                    n = int(size.strip() or b"0", 16)
                    if n == 0:
                        break
                    chunk = fh.read(n)
                    fh.readline()
                    self._lines(chunk)
            except (OSError, ValueError):
                time.sleep(0.2)

    _buf = b""

    def _lines(self, chunk: bytes) -> None:
        now = time.monotonic()
        self._buf += chunk
        *lines, self._buf = self._buf.split(b"\n")
        for line in lines:
            if not line.strip():
                continue
            obj = json.loads(line).get("object") or {}
            meta = obj.get("metadata") or {}
            self._rv = meta.get("resourceVersion", self._rv)
            if (obj.get("spec") or {}).get("nodeName"):
                with self.lock:
                    self.bound.setdefault(meta.get("name", ""), now)

    def stop(self) -> None:
        self._stop = True


def pod_body(name: str, gpus: int, labels: dict[str, str] | None = None, scheduler: str = "") -> dict:
    """A benchmark pod (``scheduler``: its spec.schedulerName; '' : the default scheduler's)."""
    res = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    spec: dict = {"containers": [{"name": "main", "image": "example.invalid/train", "resources": res}]}
    if scheduler:
        spec["schedulerName"] = scheduler
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "1", **(labels or {})}},
            "spec": spec}


@dataclass
class Phase:
    """One phase's figures."""

    name: str
    waits: list[float]       # create-to-bind seconds of the bound pods
    left: int                # pods not bound within the timeout
    span: float              # seconds the creates took
    rate: float              # bound pods per second (first create, or the nodes' arrival, to the last bind)
    writes: dict[str, int]   # User-Agent ("dlsched", "kube-scheduler", "other") -> writes to the namespace
    refused: int             # dlsched writes the API server refused (>= 400)
    began: float = 0.0       # wall times of the phase, for the audit log
    ended: float = 0.0
    kinds: dict[str, int] = field(default_factory=dict)   # dlsched's writes by "verb resource[/subresource]"

    def per_pod(self, who: str) -> float:
        return self.writes.get(who, 0) / max(1, len(self.waits))


def cordon_all(cp) -> None:
    """Mark every node unschedulable: a drain's pods find no room until new nodes come."""
    _, nodes = cp.request("GET", "/api/v1/nodes")
    names = [n["metadata"]["name"] for n in nodes["items"] if not n["spec"].get("unschedulable")]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: cp.request("PATCH", f"/api/v1/nodes/{n}", {"spec": {"unschedulable": True}},
                                           content_type="application/strategic-merge-patch+json"), names))


def run_phase(cp, tag: str, pods: int, gpus: int, timeout: float, drain: tuple[int, int] | None = None,
              scheduler: str = "") -> Phase:
    """Create ``pods`` pods at once; their create-to-bind seconds, how many never bound, the
    seconds the creates took (the API server's pace on this machine) and the pods/s. ``drain``
    (nodes, GPUs per node): the nodes there are cordoned first, and that many new nodes are added
    once the pods were created and tried (3 s). ``scheduler``: the pods' spec.schedulerName."""
    began = time.time()
    if drain is not None:
        cordon_all(cp)
    status, listing = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert status == 200, listing
    watch = BindWatch(cp.api_url, cp.token, listing["metadata"]["resourceVersion"])
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"{tag}-{i:04d}"
        st, body = cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_body(name, gpus, scheduler=scheduler))
        if st != 201:
            raise RuntimeError(f"create {name}: {st} {body}")
        created[name] = time.monotonic()

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(pods)))
    span = time.monotonic() - start
    if drain is not None:
        time.sleep(3.0)          # every pod tried and found no room
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: add_gpu_node(cp, f"{tag}-node-{i:03d}", drain[1]), range(drain[0])))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with watch.lock:
            if len(watch.bound) >= pods:
                break
        time.sleep(0.2)
    watch.stop()
    with watch.lock:
        waits = [watch.bound[n] - t for n, t in created.items() if n in watch.bound]
        last = max((watch.bound[n] for n in created if n in watch.bound), default=start)
    ended = time.time()
    clear_pods(cp, 0.5)
    rate = len(waits) / max(last - start, 1e-9) if waits else 0.0
    return Phase(tag, waits, pods - len(waits), span, rate, {}, 0, began, ended)


def count_writes(events: list[dict], phase: Phase) -> None:
    """The phase's writes to the benchmark's namespace (pod patches, Bindings, events ...) by who sent them."""
    from datetime import UTC, datetime

    for e in events:
        at = datetime.strptime(e["requestReceivedTimestamp"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC).timestamp()
        if not phase.began <= at <= phase.ended or (e.get("objectRef") or {}).get("namespace") != NAMESPACE:
            continue
        agent = e.get("userAgent", "")
        who = "dlsched" if agent.startswith("dlsched") else "kube-scheduler" if agent.startswith("kube-scheduler") \
            else "other"
        if who == "other":
            continue   # this benchmark's own creates and deletes
        phase.writes[who] = phase.writes.get(who, 0) + 1
        if who == "dlsched":
            ref = e.get("objectRef") or {}
            kind = f"{e.get('verb')} {ref.get('resource')}" + (f"/{ref['subresource']}" if ref.get("subresource") else "")
            phase.kinds[kind] = phase.kinds.get(kind, 0) + 1
            if (e.get("responseStatus") or {}).get("code", 200) >= 400:
                phase.refused += 1


def clear_pods(cp, step: float) -> None:
    """Delete every pod of the benchmark's namespace and wait (up to 60 s) until none is left."""
    cp.request("DELETE", f"/api/v1/namespaces/{NAMESPACE}/pods?gracePeriodSeconds=0")
    gone = time.monotonic() + 60
    while time.monotonic() < gone:
        _, rest = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
        if not rest.get("items"):
            break
        time.sleep(step)


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
    for verb in ("filter", "bind"):
        n = sums.get((verb, "count"), 0.0)
        if n:
            parts.append(f"{verb} {1000 * sums[(verb, 'sum')] / n:.1f} ms over {n:.0f} calls")
    return ", ".join(parts) or "no metrics (prometheus-client not installed)"


def summary(waits: list[float]) -> str:
    if not waits:
        return "no pod bound"
    ordered = sorted(waits)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):.3f} s   p95 {p95:.3f} s   max {ordered[-1]:.3f} s"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--scheduler-qps", type=float, default=1000.0,
                    help="kube-scheduler's API client rate (burst twice that); 0: its default (50)")
    ap.add_argument("--modes", default="burst,drain", help="burst, drain or both (comma-separated)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds a phase waits for its pods to bind")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    ap.add_argument("--decisions", type=Path, default=None, help="write dlsched's decision log (JSON) here")
    args = ap.parse_args(argv)
    if args.pods < 1 or args.nodes < 1 or args.gpus_per_node < 1:
        print("error: --pods, --nodes and --gpus-per-node must be >= 1", file=sys.stderr)
        return 2
    if args.pods > args.nodes * args.gpus_per_node:
        print(f"error: --pods {args.pods} is more than the {args.nodes * args.gpus_per_node} GPUs: the burst must "
              f"fit, or the figures measure the wait for free GPUs", file=sys.stderr)
        return 2
    if args.scheduler_qps < 0:
        print(f"error: --scheduler-qps must be >= 0, got {args.scheduler_qps}", file=sys.stderr)
        return 2
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if not modes or any(m not in ("burst", "drain") for m in modes):
        print(f"error: --modes {args.modes!r}: give burst, drain or burst,drain", file=sys.stderr)
        return 2
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
    phases: list[tuple[str, Phase, Phase]] = []
    try:
        st, body = cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": NAMESPACE}})
        assert st == 201, body
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: add_gpu_node(cp, f"node-{i:03d}", args.gpus_per_node), range(args.nodes)))
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo", work / "serve.log")
        svc.start()
        print(f"control plane + {args.nodes} nodes x {args.gpus_per_node} GPUs + dlsched serve ready in "
              f"{time.monotonic() - t0:.1f} s; kube-scheduler client qps: {qps or 'default (50)'}"
              f"{f', burst {int(2 * qps)}' if qps else ''}")
        for mode in modes:
            drain = (args.nodes, args.gpus_per_node) if mode == "drain" else None
            base = run_phase(cp, f"plain-{mode}", args.pods, 0, args.timeout, drain)
            gpu = run_phase(cp, f"gpu-{mode}", args.pods, 1, args.timeout, drain)
            phases.append((mode, base, gpu))
        state = svc.get("/api/v1/state")
        served = server_times(svc)
        if args.decisions is not None:
            args.decisions.write_text(json.dumps(svc.decisions()))
    finally:
        if svc is not None:
            svc.stop()
        events = audit_writes(cp)
        cleanup(cp)
    ok = True
    for mode, base, gpu in phases:
        count_writes(events, base)
        count_writes(events, gpu)
        print(f"{mode}: {args.pods} pods created at once"
              f"{f', then {args.nodes} new nodes (the old ones cordoned)' if mode == 'drain' else ''}; "
              f"create-to-bind (this process's clock):")
        for label, ph in (("kube-scheduler alone (no GPU)", base), ("through dlsched (1 GPU each)", gpu)):
            print(f"  {label:31s} {summary(ph.waits)}   not bound: {ph.left}   {ph.rate:.1f} pods/s   "
                  f"(created in {ph.span:.2f} s)")
        ratio = gpu.rate / base.rate if base.rate else float("nan")
        print(f"  pods/s through dlsched / kube-scheduler alone: {ratio:.2f}x (goal >= 0.75x)")
        print(f"  API writes per bound pod: dlsched {gpu.per_pod('dlsched'):.2f} (goal <= 1.2; "
              f"{gpu.writes.get('dlsched', 0)} writes, {gpu.refused} refused) + kube-scheduler "
              f"{gpu.per_pod('kube-scheduler'):.2f}; kube-scheduler alone: {base.per_pod('kube-scheduler'):.2f}")
        print(f"  dlsched's writes: {', '.join(f'{k} {n}' for k, n in sorted(gpu.kinds.items())) or 'none'}")
        ok = ok and not base.left and not gpu.left
    print(f"  dlsched: binds {state['binds']}, counters {state['counters']}")
    print(f"  dlsched's own time per extender call (mean, from /metrics): {served}")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
