"""The phase runner that ``bench_bind_latency.py`` (extender mode), ``bench_scheduler_mode.py``
(``--mode scheduler``) and ``bench_gang.py`` share: a watch of the benchmark namespace's binds,
a burst or drain of pods timed from create to bind, the API writes per pod from the audit log,
the service's CPU per phase, the common options and their checks. One copy, so that both modes'
figures are measured by the same code and compare.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import socket
import ssl
import statistics
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlparse

from support.control_plane import NODE_CPUS, NODE_PODS, add_gpu_node, scheduler_metrics

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
        self._buf = b""
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


def pod_body(name: str, gpus: int, labels: dict[str, str] | None = None, scheduler: str = "",
             cpu_millis: int = 0) -> dict:
    """A benchmark pod (``scheduler``: its spec.schedulerName; '' : the default scheduler's;
    ``cpu_millis``: a CPU request, which kube-scheduler checks itself)."""
    want = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    if cpu_millis:
        want["cpu"] = f"{cpu_millis}m"
    res = {"limits": dict(want), "requests": dict(want)} if want else {}
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
    cpu: float = float("nan")   # CPU seconds the dlsched process used from the phase's start to its last bind
    adds: list[float] = field(default_factory=list)   # drain: seconds from the first node add to each add's end
    last: float = float("nan")  # seconds from the first create (burst) or node add (drain) to the last bind
    sched: dict[str, float] = field(default_factory=dict)  # kube-scheduler's metrics over the phase (deltas):
    # from the first create (burst) or the first node add (drain) to the last bind, as ``rate``

    def per_pod(self, who: str) -> float:
        return self.writes.get(who, 0) / max(1, len(self.waits))

    def cpu_ms_per_pod(self) -> float:
        return 1000.0 * self.cpu / max(1, len(self.waits))


def process_cpu(pid: int | None) -> float:
    """CPU seconds (user + system) process ``pid`` has used; NaN when it cannot be read (no
    ``/proc``, no process): a figure that the machine's other load does not inflate the way it
    does wall time."""
    if pid is None:
        return float("nan")
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    except OSError:
        return float("nan")
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cordon_all(cp) -> None:
    """Mark every node unschedulable: a drain's pods find no room until new nodes come."""
    _, nodes = cp.request("GET", "/api/v1/nodes")
    names = [n["metadata"]["name"] for n in nodes["items"] if not n["spec"].get("unschedulable")]
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda n: cp.request("PATCH", f"/api/v1/nodes/{n}", {"spec": {"unschedulable": True}},
                                           content_type="application/strategic-merge-patch+json"), names))


def run_phase(cp, tag: str, pods: int, gpus: int, timeout: float, drain: tuple[int, int] | None = None,
              scheduler: str = "", service_pid: int | None = None, cpu_millis: int = 0) -> Phase:
    """Create ``pods`` pods at once; their create-to-bind seconds, how many never bound, the
    seconds the creates took (the API server's pace on this machine) and the pods/s. ``drain``
    (nodes, GPUs per node): the nodes there are cordoned first, and that many new nodes are added
    once the pods were created and tried (3 s). ``scheduler``: the pods' spec.schedulerName.
    ``service_pid``: the dlsched process whose CPU seconds over the phase are counted.
    ``cpu_millis``: each pod's CPU request (:func:`packed_cpu_millis`)."""
    began = time.time()
    cpu0 = process_cpu(service_pid)
    metrics0 = scheduler_metrics(cp)
    if drain is not None:
        cordon_all(cp)
    status, listing = cp.request("GET", f"/api/v1/namespaces/{NAMESPACE}/pods")
    assert status == 200, listing
    watch = BindWatch(cp.api_url, cp.token, listing["metadata"]["resourceVersion"])
    created: dict[str, float] = {}

    def create(i: int) -> None:
        name = f"{tag}-{i:04d}"
        body = pod_body(name, gpus, scheduler=scheduler, cpu_millis=cpu_millis)
        st, body = cp.request("POST", f"/api/v1/namespaces/{NAMESPACE}/pods", body)
        if st != 201:
            raise RuntimeError(f"create {name}: {st} {body}")
        created[name] = time.monotonic()

    start = time.monotonic()
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(create, range(pods)))
    span = time.monotonic() - start
    adds: list[float] = []
    if drain is not None:
        time.sleep(3.0)          # every pod tried and found no room
        metrics0 = scheduler_metrics(cp)   # a drain's attempts: those the new nodes bring
        start = time.monotonic()

        def add(i: int) -> float:
            add_gpu_node(cp, f"{tag}-node-{i:03d}", drain[1])
            return time.monotonic() - start

        with ThreadPoolExecutor(8) as pool:
            adds = sorted(pool.map(add, range(drain[0])))
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with watch.lock:
            if len(watch.bound) >= pods:
                break
        time.sleep(0.2)
    watch.stop()
    cpu = process_cpu(service_pid) - cpu0
    sched = metric_deltas(metrics0, scheduler_metrics(cp))
    with watch.lock:
        waits = [watch.bound[n] - t for n, t in created.items() if n in watch.bound]
        last = max((watch.bound[n] for n in created if n in watch.bound), default=start)
    ended = time.time()
    clear_pods(cp, 0.5)
    rate = len(waits) / max(last - start, 1e-9) if waits else 0.0
    return Phase(tag, waits, pods - len(waits), span, rate, {}, 0, began, ended, cpu=cpu, adds=adds,
                 last=last - start if waits else float("nan"), sched=sched)


def metric_deltas(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    """How much each of kube-scheduler's counters and sums grew between two scrapes (gauges are
    left out: a queue's length is no count of the phase's work)."""
    return {k: v - before.get(k, 0.0) for k, v in after.items()
            if not k.startswith(("scheduler_pending_pods", "scheduler_scheduler_cache_size"))}


def metric_sum(samples: dict[str, float], name: str, **labels: str) -> float:
    """The sum of the samples called ``name`` whose labels include ``labels``."""
    want = [f'{k}="{v}"' for k, v in labels.items()]
    return sum(v for k, v in samples.items()
               if k.split("{")[0] == name and all(w in k for w in want))


def attempt_line(phase: Phase, label: str) -> str:
    """kube-scheduler's own account of a phase: its scheduling attempts per bound pod by result,
    the mean time of an attempt's algorithm (its filters, with an extender's filter round trip)
    and of a binding cycle (with an extender's bind call), and why pods entered its queues. An
    attempt that finds no node sends its pod to wait for an event or a back-off: in a drain, these
    are the retries that the pods' last binds wait for."""
    m = phase.sched
    if not m:
        return f"  kube-scheduler's attempts ({label}): its metrics not read"
    bound = max(1, len(phase.waits))
    results = {r: metric_sum(m, "scheduler_schedule_attempts_total", result=r)
               for r in ("scheduled", "unschedulable", "error")}
    tries = sum(results.values())

    def mean_ms(name: str) -> float:
        n = metric_sum(m, f"{name}_count")
        return 1000.0 * metric_sum(m, f"{name}_sum") / n if n else float("nan")

    moved: dict[str, float] = {}
    for key, value in m.items():
        if key.startswith("scheduler_queue_incoming_pods_total{") and value:
            event = key.split('event="')[1].split('"')[0]
            queue = key.split('queue="')[1].split('"')[0]
            moved[f"{event}->{queue}"] = moved.get(f"{event}->{queue}", 0.0) + value
    return (f"  kube-scheduler's attempts ({label}): {tries / bound:.2f} per bound pod ("
            + ", ".join(f"{r} {n:.0f}" for r, n in results.items())
            + f"); per attempt: algorithm {mean_ms('scheduler_scheduling_algorithm_duration_seconds'):.2f} ms, "
            f"end to end {mean_ms('scheduler_e2e_scheduling_duration_seconds'):.2f} ms; binding "
            f"{mean_ms('scheduler_binding_duration_seconds'):.1f} ms; pods queued: "
            + (", ".join(f"{k} {v:.0f}" for k, v in sorted(moved.items())) or "none"))


def packed_cpu_millis(gpus_per_node: int) -> int:
    """The CPU request (millicores) that lets exactly ``gpus_per_node`` pods fit a benchmark node, so
    that kube-scheduler alone's pods, which request no GPU, pack as densely as dlsched's one-GPU pods.
    Without it a drain compares unlike work: 110 GPU-less pods fit each new node (pod count) against 8
    one-GPU pods, so kube-scheduler alone's 500 pods have room after 5 node adds, dlsched's after 63."""
    millis = NODE_CPUS * 1000 // gpus_per_node
    if millis < 1 or (gpus_per_node + 1) * millis <= NODE_CPUS * 1000 or gpus_per_node > NODE_PODS:
        raise ValueError(f"no CPU request packs exactly {gpus_per_node} pods on a {NODE_CPUS}-CPU node")
    return millis


def nodes_needed(pods: int, per_node: int) -> int:
    """New nodes a drain must add before its last pod has room."""
    return math.ceil(pods / per_node)


def drain_room_line(label: str, phase: Phase, pods: int, per_node: int) -> str:
    """When a drain's last pod had room (the add that completed the nodes it needs) beside its last
    bind, both from the first node add: what bounds the phase's pods/s before any scheduler does."""
    need = nodes_needed(pods, per_node)
    if not phase.adds or need > len(phase.adds):
        return f"  {label}: room for {pods} pods needs {need} new nodes ({per_node} a node); {len(phase.adds)} added"
    return (f"  {label}: room for all {pods} pods ({per_node} a node) once {need} of {len(phase.adds)} nodes were "
            f"added, {phase.adds[need - 1]:.2f} s after the first add began; last bind at {phase.last:.2f} s "
            f"({phase.last - phase.adds[need - 1]:.2f} s after room)")


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


def summary(waits: list[float]) -> str:
    if not waits:
        return "no pod bound"
    ordered = sorted(waits)
    p95 = ordered[min(len(ordered) - 1, int(0.95 * len(ordered)))]
    return f"median {statistics.median(ordered):.3f} s   p95 {p95:.3f} s   max {ordered[-1]:.3f} s"


def phase_options(ap: argparse.ArgumentParser, shared: Path) -> None:
    """The options both benchmarks take (sizes, kube-scheduler's client rate, the modes)."""
    ap.add_argument("--pods", type=int, default=500)
    ap.add_argument("--nodes", type=int, default=100)
    ap.add_argument("--gpus-per-node", type=int, default=8)
    ap.add_argument("--scheduler-qps", type=float, default=1000.0,
                    help="kube-scheduler's API client rate (burst twice that); 0: its default (50)")
    ap.add_argument("--modes", default="burst,drain", help="burst, drain or both (comma-separated)")
    ap.add_argument("--timeout", type=float, default=180.0, help="seconds a phase waits for its pods to bind")
    ap.add_argument("--shared", type=Path, default=shared)


def check_args(args) -> str:
    """'' or the one error line for bad sizes."""
    if args.pods < 1 or args.nodes < 1 or args.gpus_per_node < 1:
        return "error: --pods, --nodes and --gpus-per-node must be >= 1"
    if args.pods > args.nodes * args.gpus_per_node:
        return (f"error: --pods {args.pods} is more than the {args.nodes * args.gpus_per_node} GPUs: the burst must "
                "fit, or the figures measure the wait for free GPUs")
    if args.scheduler_qps < 0:
        return f"error: --scheduler-qps must be >= 0, got {args.scheduler_qps}"
    if not modes_of(args) or any(m not in ("burst", "drain") for m in modes_of(args)):
        return f"error: --modes {args.modes!r}: give burst, drain or burst,drain"
    if "drain" in modes_of(args):
        try:
            packed_cpu_millis(args.gpus_per_node)
        except ValueError as exc:   # before the control plane starts, not a traceback after
            return f"error: --gpus-per-node {args.gpus_per_node}: {exc} (the drain's like-for-like baseline)"
    return ""


def modes_of(args) -> list[str]:
    return [m.strip() for m in args.modes.split(",") if m.strip()]


def remove_work(work: Path, finished: bool) -> None:
    """The benchmark's temporary folder (the service's store and log): removed after a run that
    finished; kept, and named, after one that failed, for its ``serve.log``."""
    if finished:
        shutil.rmtree(work, ignore_errors=True)
    else:
        print(f"kept {work} (the service's store and serve.log) after the failed run")


def make_namespace_and_nodes(cp, nodes: int, gpus_per_node: int) -> None:
    """The benchmark namespace and ``nodes`` kubelet-less nodes of ``gpus_per_node`` GPUs."""
    st, body = cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                         "metadata": {"name": NAMESPACE}})
    assert st == 201, body
    with ThreadPoolExecutor(8) as pool:
        list(pool.map(lambda i: add_gpu_node(cp, f"node-{i:03d}", gpus_per_node), range(nodes)))


def run_baselines(cp, mode: str, args, drain: tuple[int, int] | None) -> tuple[Phase, Phase | None]:
    """kube-scheduler alone's phases of one mode: its GPU-less pods, and in a drain the same pods
    packed as densely as one-GPU pods (:func:`packed_cpu_millis`; None in a burst)."""
    base = run_phase(cp, f"plain-{mode}", args.pods, 0, args.timeout, drain)
    if drain is None:
        return base, None
    packed = run_phase(cp, f"packed-{mode}", args.pods, 0, args.timeout, drain,
                       cpu_millis=packed_cpu_millis(args.gpus_per_node))
    return base, packed


def baseline_rows(args, base: Phase, packed: Phase | None) -> list[tuple[str, Phase]]:
    """(label, phase) of kube-scheduler alone's phases, as the reports print them."""
    rows = [("kube-scheduler alone (no GPU)", base)]
    if packed is not None:
        rows.append((f"kube-scheduler alone ({args.gpus_per_node}/node)", packed))
    return rows


def count_phase_writes(events: list[dict], *phases: Phase | None) -> None:
    """:func:`count_writes` for each phase that ran."""
    for phase in phases:
        if phase is not None:
            count_writes(events, phase)


def all_bound(*phases: Phase | None) -> bool:
    """Every pod of every phase that ran was bound within the timeout."""
    return all(not phase.left for phase in phases if phase is not None)


def packed_lines(args, base: Phase, mine: Phase, packed: Phase, who: str = "dlsched") -> list[str]:
    """A drain's like-for-like lines: ``mine`` over kube-scheduler alone with as many pods a node
    (``packed``), and when each phase's last pod had room beside its last bind."""
    ratio = mine.rate / packed.rate if packed.rate else float("nan")
    per = args.gpus_per_node
    (base_label, _), (packed_label, _) = baseline_rows(args, base, packed)
    return [f"  pods/s {who} / kube-scheduler alone at {per} pods a node (like for like): {ratio:.2f}x",
            drain_room_line(base_label, base, args.pods, NODE_PODS),
            drain_room_line(packed_label, packed, args.pods, per),
            drain_room_line(who, mine, args.pods, per)]
