"""The Binding call alone, on the real control plane: Bindings/s and this process's CPU per
Binding for the client the service uses (the official ``kubernetes`` client, a pool of blocking
threads, ``service/scheduler_mode/binder.py``) beside an asynchronous one (``httpx.AsyncClient``
on one event loop, HTTP/1.1 keep-alive), at several numbers in flight.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_binding_calls.py [--pods 300]
        [--threads 16,64] [--in-flight 16,64]

Why (issue 34, point 4): the scheduler mode's drain had its pods wait for a bind worker, and an
asynchronous client was the suggested fix. This measures whether the client is the limit: each
case binds ``--pods`` pods that no scheduler handles (``schedulerName: nobody``) to 100
kubelet-less nodes, after a warm-up round of as many pods with the same client and concurrency
(connections opened: a new TLS connection is ≈ 80 ms of CPU here, which would swamp the figure).
CPU is this process's (``getrusage``), which other load on the machine does not inflate the way it
does wall time. Exit 1 when a Binding is refused; skips (exit 0, with the reason) when the control
plane cannot start here.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import sys
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT.parent / "src"))
sys.path.insert(0, str(ROOT.parent / "tests"))
sys.path.insert(0, str(ROOT))

from k8s_phases import NAMESPACE, make_namespace_and_nodes  # noqa: E402
from support.control_plane import cleanup, free_port, missing_reason, start_control_plane  # noqa: E402

NODES = 100


def cpu_s() -> float:
    use = resource.getrusage(resource.RUSAGE_SELF)
    return use.ru_utime + use.ru_stime


def binding(name: str, uid: str, i: int) -> dict:
    """The Binding the service posts (GPU annotation included), to node ``i % NODES``."""
    return {"apiVersion": "v1", "kind": "Binding",
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid, "annotations": {"dlsched.io/gpus": "0"}},
            "target": {"kind": "Node", "name": f"node-{i % NODES:03d}", "apiVersion": "v1"}}


def make_pods(cp, tag: str, n: int) -> list[tuple[str, str]]:
    """``n`` pending pods no scheduler binds: (name, uid)."""
    def one(i: int) -> tuple[str, str]:
        name = f"{tag}-{i:04d}"
        st, body = cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", {
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"schedulerName": "nobody", "containers": [{"name": "main", "image": "example.invalid/x"}]}})
        if st != 201:
            raise RuntimeError(f"create {name}: {st} {body}")
        return name, body["metadata"]["uid"]
    with ThreadPoolExecutor(8) as pool:
        return list(pool.map(one, range(n)))


def timed(run: Callable[[list[tuple[str, str]]], int], cp, tag: str, n: int) -> tuple[float, float, int]:
    """Warm up, then bind ``n`` pods with ``run``: (Bindings/s, CPU ms per Binding, refused)."""
    run(make_pods(cp, f"w{tag}", n))
    pods = make_pods(cp, tag, n)
    c0, t0 = cpu_s(), time.monotonic()
    refused = run(pods)
    wall, cpu = time.monotonic() - t0, cpu_s() - c0
    return n / wall, 1000.0 * cpu / n, refused


def threaded(api, threads: int) -> Callable[[list[tuple[str, str]]], int]:
    """The service's way: the official client's create_namespaced_pod_binding from ``threads`` threads."""
    from kubernetes.client.exceptions import ApiException

    from dlsched.service.kube import _read

    def one(arg: tuple[int, tuple[str, str]]) -> int:
        i, (name, uid) = arg
        try:
            _read(api.create_namespaced_pod_binding(name, NAMESPACE, binding(name, uid, i), _preload_content=False))
        except ApiException:
            return 1
        return 0

    def run(pods: list[tuple[str, str]]) -> int:
        with ThreadPoolExecutor(threads) as pool:
            return sum(pool.map(one, enumerate(pods)))
    return run


def asynchronous(cp, in_flight: int) -> Callable[[list[tuple[str, str]]], int]:
    """``httpx.AsyncClient`` on one event loop, at most ``in_flight`` Bindings at once (one client,
    kept across the warm-up and the timed round, so its connections stay open)."""
    import httpx

    loop = asyncio.new_event_loop()
    client = httpx.AsyncClient(base_url=cp.api_url, verify=False,  # noqa: S501 - the test control plane's own cert
                               headers={"Authorization": f"Bearer {cp.token}", "Content-Type": "application/json"},
                               limits=httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight))

    async def all_of(pods: list[tuple[str, str]]) -> int:
        gate = asyncio.Semaphore(in_flight)

        async def one(i: int, name: str, uid: str) -> int:
            async with gate:
                resp = await client.post(f"/api/v1/namespaces/{NAMESPACE}/pods/{name}/binding",
                                         content=json.dumps(binding(name, uid, i)))
                return int(resp.status_code != 201)
        return sum(await asyncio.gather(*(one(i, n, u) for i, (n, u) in enumerate(pods))))

    def run(pods: list[tuple[str, str]]) -> int:
        return loop.run_until_complete(all_of(pods))
    run.close = lambda: (loop.run_until_complete(client.aclose()), loop.close())  # type: ignore[attr-defined]
    return run


def counts(text: str, option: str) -> list[int]:
    """A comma-separated list of positive integers, or SystemExit(2) with one error line."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        print(f"error: {option} {text!r}: give positive integers, comma-separated", file=sys.stderr)
        raise SystemExit(2)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pods", type=int, default=300, help="Bindings timed per case (as many again to warm up)")
    ap.add_argument("--threads", default="16,64", help="threads of the official client (comma-separated)")
    ap.add_argument("--in-flight", default="16,64", help="Bindings in flight on the asynchronous client")
    ap.add_argument("--shared", type=Path, default=ROOT.parent.parent / "shared")
    args = ap.parse_args(argv)
    if args.pods < 1:
        print(f"error: --pods must be >= 1, got {args.pods}", file=sys.stderr)
        return 2
    threads, in_flight = counts(args.threads, "--threads"), counts(args.in_flight, "--in-flight")
    reason = missing_reason(args.shared / "k8s")
    if reason:
        print(f"skipped: {reason}")
        return 0
    from dlsched.service.kube import make_api

    cp = start_control_plane(args.shared / "k8s", f"http://127.0.0.1:{free_port()}/scheduler")
    refused = 0
    try:
        make_namespace_and_nodes(cp, NODES, 8)
        api = make_api(api_server=cp.api_url, token=cp.token, insecure=True)
        print(f"{args.pods} Bindings per case after as many to warm up; {NODES} nodes; this process's CPU")
        for n in threads:
            rate, cpu, bad = timed(threaded(api, n), cp, f"t{n}", args.pods)
            refused += bad
            print(f"  kubernetes client, {n:3d} threads:   {rate:6.1f} Bindings/s   {cpu:5.2f} ms CPU each"
                  f"   refused {bad}")
        for n in in_flight:
            run = asynchronous(cp, n)
            try:
                rate, cpu, bad = timed(run, cp, f"a{n}", args.pods)
            finally:
                run.close()
            refused += bad
            print(f"  httpx.AsyncClient, {n:3d} in flight: {rate:6.1f} Bindings/s   {cpu:5.2f} ms CPU each"
                  f"   refused {bad}")
    finally:
        cleanup(cp)
    return 1 if refused else 0


if __name__ == "__main__":
    raise SystemExit(main())
