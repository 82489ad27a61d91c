"""Create-to-bind latency through the real kube-scheduler: a burst of one-GPU pods scheduled via
dlsched's extender, beside the same burst of pods without GPUs that kube-scheduler binds alone,
in the same run on the same control plane.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_bind_latency.py [--pods 500] [--nodes 100]
        [--gpus-per-node 8] [--scheduler-qps N] [--timeout 180]

etcd + kube-apiserver + kube-scheduler v1.20.2 from ``../shared/k8s`` (as the tests start them:
loopback, free ports, stopped by PID) with ``--nodes`` kubelet-less nodes of ``--gpus-per-node``
GPUs, and ``dlsched serve --policy fifo`` (a child process, SQLite store in a temporary
directory) as the extender. Each phase creates ``--pods`` pods at once (8 client threads) and
times each from the API server's answer to its create until a watch of the namespace shows its
``spec.nodeName``; one clock (this process's monotonic clock) for both ends. The baseline phase's
pods request no GPU (they never reach the extender: ``managedResources`` is ``nvidia.com/gpu``),
the dlsched phase's one GPU each; the burst fits in the GPUs, so every wait is the scheduling
path itself, not a wait for free GPUs. The pods of a phase are deleted before the next one.

Prints, per phase, median / p95 / max create-to-bind in seconds, and the pods not bound within
``--timeout`` (the run is bounded: a phase stops waiting then). ``--scheduler-qps`` sets
kube-scheduler's API client rate (its default, 50/s with bursts of 100, when left out), which
limits how fast kube-scheduler posts bindings and events. Skips with the reason (exit 0) when the
control plane cannot start here.
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
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))

from support.control_plane import (
    add_gpu_node,
    cleanup,
    free_port,
    missing_reason,
    start_control_plane,
)
from support.service_proc import ServiceProcess

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


def pod_body(name: str, gpus: int, labels: dict[str, str] | None = None) -> dict:
    res = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"bench": "1", **(labels or {})}},
            "spec": {"containers": [{"name": "main", "image": "example.invalid/train", "resources": res}]}}


def run_phase(cp, tag: str, pods: int, gpus: int, timeout: float) -> tuple[list[float], int, float]:
    """Create ``pods`` pods at once; their create-to-bind seconds, how many never bound, and
    the seconds the creates took (the API server's pace on this machine)."""
    status, listing = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert status == 200, listing
    watch = BindWatch(cp.api_url, cp.token, listing["metadata"]["resourceVersion"])
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"{tag}-{i:04d}"
        st, body = cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", pod_body(name, gpus))
        if st != 201:
            raise RuntimeError(f"create {name}: {st} {body}")
        created[name] = time.monotonic()

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(pods)))
    span = time.monotonic() - start
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with watch.lock:
            if len(watch.bound) >= pods:
                break
        time.sleep(0.2)
    watch.stop()
    with watch.lock:
        waits = [watch.bound[n] - t for n, t in created.items() if n in watch.bound]
    clear_pods(cp, 0.5)
    return waits, pods - len(waits), span


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
    ap.add_argument("--scheduler-qps", type=float, default=None)
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
    reason = missing_reason(args.shared / "k8s")
    if reason:
        print(f"skipped: {reason}")
        return 0
    port = free_port()
    t0 = time.monotonic()
    cp = start_control_plane(args.shared / "k8s", f"http://127.0.0.1:{port}/scheduler", cache_capable=True,
                             qps=args.scheduler_qps)
    work = Path(tempfile.mkdtemp(prefix="dlsched-bench-bind-"))
    svc = None
    try:
        st, body = cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": NAMESPACE}})
        assert st == 201, body
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(lambda i: add_gpu_node(cp, f"node-{i:03d}", args.gpus_per_node), range(args.nodes)))
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo", work / "serve.log")
        svc.start()
        print(f"control plane + {args.nodes} nodes x {args.gpus_per_node} GPUs + dlsched serve ready in "
              f"{time.monotonic() - t0:.1f} s; kube-scheduler client qps: {args.scheduler_qps or 'default (50)'}")
        base, base_left, base_span = run_phase(cp, "plain", args.pods, 0, args.timeout)
        gpu, gpu_left, gpu_span = run_phase(cp, "gpu", args.pods, 1, args.timeout)
        state = svc.get("/api/v1/state")
        served = server_times(svc)
        if args.decisions is not None:
            args.decisions.write_text(json.dumps(svc.decisions()))
    finally:
        if svc is not None:
            svc.stop()
        cleanup(cp)
    print(f"{args.pods} pods created at once, create-to-bind (this process's clock):")
    print(f"  kube-scheduler alone (no GPU)   {summary(base)}   not bound: {base_left}   "
          f"(created in {base_span:.2f} s)")
    print(f"  through dlsched (1 GPU each)    {summary(gpu)}   not bound: {gpu_left}   (created in {gpu_span:.2f} s)")
    if base and gpu:
        print(f"  median difference: {statistics.median(gpu) - statistics.median(base):+.3f} s; "
              f"GPU pods waiting > 5 s: {sum(w > 5.0 for w in gpu)}")
    print(f"  dlsched: binds {state['binds']}, counters {state['counters']}")
    print(f"  dlsched's own time per extender call (mean, from /metrics): {served}")
    return 0 if not base_left and not gpu_left else 1


if __name__ == "__main__":
    raise SystemExit(main())
