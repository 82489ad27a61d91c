"""Extender latency under load: filter + prioritize over N nodes at a fixed rate, beside an empty
endpoint of the same server measured in the same run.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_service.py [--nodes 1000] [--rate 200] [--seconds 60]

The server (uvicorn, one process, the real app with a FIFO/consolidate core and N 8-GPU nodes, an
SQLite store in a temporary directory) runs in a child process. The load is open-loop: requests
are sent at fixed times (``--rate`` filter+prioritize pairs per second, alternating, in
``nodeCacheCapable`` form, 1,000 node names each; the same rate of empty POSTs), each over its own
kept-alive connection from a small pool of threads, so a slow answer does not slow the offered
load. Pods cycle through a pool: the first filter of each submits it and a pass nominates it;
later ones answer from the nomination, as when kube-scheduler retries. Prints p50/p99/max per
endpoint and the number of errors.
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing as mp
import queue
import socket
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


def _serve(port: int, nodes: int, db: str) -> None:
    import uvicorn

    from dlsched.registry import make_policy
    from dlsched.service.app import build_app
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    core = SchedulerCore(make_policy("fifo", "consolidate"), Store(db))
    for i in range(nodes):
        core.node_seen(NodeFacts(f"node-{i:04d}", 8, "default", "", False))
    uvicorn.run(build_app(LiveService(core, None, token="bench")), host="127.0.0.1", port=port,
                log_level="warning", access_log=False)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _pod(i: int, gpus: int) -> dict:
    lim = {"nvidia.com/gpu": str(gpus)}
    return {"metadata": {"uid": f"bench-{i}", "name": f"bench-{i}", "namespace": "default",
                         "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"containers": [{"name": "main", "resources": {"limits": lim, "requests": lim}}]},
            "status": {"phase": "Pending"}}


def run(nodes: int, rate: float, seconds: float, pods: int = 500) -> dict:
    port = _free_port()
    tmp = tempfile.mkdtemp(prefix="dlsched-bench-")
    ctx = mp.get_context("spawn")
    server = ctx.Process(target=_serve, args=(port, nodes, f"sqlite:///{tmp}/bench.db"), daemon=True)
    server.start()
    deadline = time.monotonic() + 60
    while True:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", "/healthz")
            if c.getresponse().status == 200:
                break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("server did not start") from None
            time.sleep(0.2)
    names = [f"node-{i:04d}" for i in range(nodes)]
    bodies = [json.dumps({"Pod": _pod(i, 1 + i % 8), "Nodes": None, "NodeNames": names}).encode()
              for i in range(pods)]
    jobs: queue.Queue = queue.Queue()
    results: dict[str, list[float]] = {"filter": [], "prioritize": [], "empty": []}
    errors = {"count": 0}
    lock = threading.Lock()

    def worker() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        while True:
            item = jobs.get()
            if item is None:
                return
            kind, path, body = item
            t0 = time.perf_counter()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                resp.read()
                ok = resp.status == 200
            except OSError:
                ok = False
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
            dt = time.perf_counter() - t0
            with lock:
                if ok:
                    results[kind].append(dt * 1000.0)
                else:
                    errors["count"] += 1

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(8)]
    for t in threads:
        t.start()
    interval = 1.0 / rate
    start = time.perf_counter()
    n = int(rate * seconds)
    for k in range(n):
        due = start + k * interval
        delay = due - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        body = bodies[(k // 2) % pods]
        jobs.put(("filter", "/scheduler/filter", body) if k % 2 == 0 else ("prioritize", "/scheduler/prioritize", body))
        jobs.put(("empty", "/empty", b"{}"))
    for _ in threads:
        jobs.put(None)
    for t in threads:
        t.join()
    elapsed = time.perf_counter() - start
    server.terminate()
    server.join(10)

    def summary(xs: list[float]) -> dict:
        xs = sorted(xs)
        if not xs:
            return {"n": 0}
        return {"n": len(xs), "p50_ms": round(statistics.median(xs), 3),
                "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3), "max_ms": round(xs[-1], 3)}

    return {"nodes": nodes, "rate_per_s": rate, "seconds": seconds, "errors": errors["count"],
            "elapsed_s": round(elapsed, 1),
            **{k: summary(v) for k, v in results.items()}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=200.0, help="filter+prioritize requests per second")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    out = run(args.nodes, args.rate, args.seconds)
    if args.json:
        print(json.dumps(out))
        return
    print(f"{out['nodes']} nodes, {out['rate_per_s']:g} extender requests/s (+ as many empty ones) for "
          f"{out['seconds']:g} s, errors: {out['errors']}; all answered after {out['elapsed_s']:g} s"
          + (" (the server fell behind the offered load)" if out["elapsed_s"] > 1.1 * out["seconds"] + 1 else ""))
    print(f"{'endpoint':<12}{'requests':>10}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for kind in ("filter", "prioritize", "empty"):
        s = out[kind]
        print(f"{kind:<12}{s.get('n', 0):>10}{s.get('p50_ms', float('nan')):>10}{s.get('p99_ms', float('nan')):>10}"
              f"{s.get('max_ms', float('nan')):>10}")


if __name__ == "__main__":
    main()
