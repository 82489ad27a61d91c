"""A gang's time from its last pod arriving to its last pod bound, beside a single pod's
create-to-bind, in the same run on the same real control plane.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_gang.py [--rounds 10] [--pods 4] [--gpus 8]
        [--nodes 4] [--timeout 60]

etcd + kube-apiserver + kube-scheduler v1.20.2 from ``../shared/k8s`` (as the tests start them)
with ``--nodes`` kubelet-less nodes of ``--gpus`` GPUs, and ``dlsched serve --policy fifo`` as
the extender. Rounds alternate: a gang of ``--pods`` pods of ``--gpus`` GPUs each (labels
``dlsched.io/job`` and ``dlsched.io/min-member``), created one after the other, timed from the
API server's answer to the *last* create until a watch shows the *last* pod bound; then one pod
of ``--gpus`` GPUs on its own, timed from its create's answer to its bind. Each round's pods are
deleted before the next. One clock (this process's monotonic clock) for every figure. Also prints
dlsched's own mean time per filter and bind call (its latency histograms; a gang pod's bind
includes its wait at the permit barrier). Skips with the reason (exit 0) when the control plane
cannot start here.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT / "tests"))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bench_bind_latency import server_times  # noqa: E402
from k8s_phases import NAMESPACE, BindWatch, clear_pods  # noqa: E402
from k8s_phases import pod_body as single_pod_body  # noqa: E402
from support.control_plane import add_gpu_node, cleanup, free_port, missing_reason, start_control_plane  # noqa: E402
from support.service_proc import ServiceProcess  # noqa: E402


def pod_body(name: str, gpus: int, gang: str = "", size: int = 0) -> dict:
    """A pod of ``gpus`` GPUs, a member of gang ``gang`` of ``size`` pods when given."""
    return single_pod_body(name, gpus, {"dlsched.io/job": gang, "dlsched.io/min-member": str(size)} if gang else None)


def timed(cp, names: list[str], bodies: list[dict], timeout: float) -> float | None:
    """Create the pods one after the other; seconds from the last create's answer to the last
    pod seen bound (None: not all bound within ``timeout``). The pods are deleted afterwards."""
    status, listing = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert status == 200, listing
    watch = BindWatch(cp.api_url, cp.token, listing["metadata"]["resourceVersion"])
    last = 0.0
    for name, body in zip(names, bodies):
        st, out = cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        if st != 201:
            raise RuntimeError(f"create {name}: {st} {out}")
        last = time.monotonic()
    deadline = last + timeout
    result = None
    while time.monotonic() < deadline:
        with watch.lock:
            if all(n in watch.bound for n in names):
                result = max(watch.bound[n] for n in names) - last
                break
        time.sleep(0.01)
    watch.stop()
    clear_pods(cp, 0.2)
    time.sleep(0.5)   # the service's watch sees the deletions before the next round
    return result


def summary(values: list[float]) -> str:
    if not values:
        return "none bound"
    return (f"median {statistics.median(values):.3f} s   min {min(values):.3f} s   max {max(values):.3f} s   "
            f"({len(values)} rounds)")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--pods", type=int, default=4, help="pods per gang")
    ap.add_argument("--gpus", type=int, default=8, help="GPUs per pod (and per node)")
    ap.add_argument("--nodes", type=int, default=4)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds a round waits for its pods to bind")
    ap.add_argument("--shared", type=Path, default=ROOT.parent / "shared")
    args = ap.parse_args(argv)
    if min(args.rounds, args.pods, args.gpus, args.nodes) < 1:
        print("error: --rounds, --pods, --gpus and --nodes must be >= 1", file=sys.stderr)
        return 2
    if args.pods > args.nodes:
        print(f"error: --pods {args.pods} is more than --nodes {args.nodes}: the gang must fit", file=sys.stderr)
        return 2
    reason = missing_reason(args.shared / "k8s")
    if reason:
        print(f"skipped: {reason}")
        return 0
    port = free_port()
    cp = start_control_plane(args.shared / "k8s", f"http://127.0.0.1:{port}/scheduler", cache_capable=True)
    work = Path(tempfile.mkdtemp(prefix="dlsched-bench-gang-"))
    svc = None
    gangs: list[float] = []
    singles: list[float] = []
    missed = 0
    try:
        st, body = cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                             "metadata": {"name": NAMESPACE}})
        assert st == 201, body
        for i in range(args.nodes):
            add_gpu_node(cp, f"node-{i:03d}", args.gpus)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{work}/bench.db", "fifo", work / "serve.log")
        svc.start()
        for r in range(args.rounds):
            names = [f"g{r}-{i}" for i in range(args.pods)]
            took = timed(cp, names, [pod_body(n, args.gpus, f"g{r}", args.pods) for n in names], args.timeout)
            gangs.append(took) if took is not None else None
            one = timed(cp, [f"s{r}"], [pod_body(f"s{r}", args.gpus)], args.timeout)
            singles.append(one) if one is not None else None
            missed += (took is None) + (one is None)
        served = server_times(svc)
        state = svc.get("/api/v1/state")
    finally:
        if svc is not None:
            svc.stop()
        cleanup(cp)
    print(f"{args.nodes} nodes x {args.gpus} GPUs; gang = {args.pods} pods x {args.gpus} GPUs; policy fifo")
    print(f"  gang: last pod created -> last pod bound     {summary(gangs)}")
    print(f"  single pod: created -> bound                 {summary(singles)}")
    print(f"  rounds not bound within {args.timeout:g} s: {missed}")
    print(f"  dlsched's own time per extender call (mean, from /metrics): {served}")
    print(f"  dlsched counters: {state['counters']}")
    return 0 if not missed else 1


if __name__ == "__main__":
    raise SystemExit(main())
