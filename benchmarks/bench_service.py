"""Extender latency under load: filter + prioritize over N nodes at a fixed rate, beside an empty
endpoint of the same server measured in the same run.

    PYTHONPATH=src .venv/bin/python benchmarks/bench_service.py [--nodes 1000] [--rate 200] [--seconds 60]
        [--eta SECONDS] [--queues]

The server (uvicorn, one process, the real app with a FIFO/consolidate core and N 8-GPU nodes, an
SQLite store in a temporary directory; uvloop and httptools when installed, as ``dlsched serve``
runs) runs in a child process. The load is open-loop: every request has a due time fixed in
advance, ``--rate`` per second, and is sent then over an idle kept-alive connection (a new one is
opened when none is idle, up to ``--connections``; past that it waits for the first to free up),
so a slow answer does not slow the offered load; a request's latency runs from its due time to the
last byte of its answer, so a late send counts against it too. The client is one thread with
non-blocking sockets and request bytes built before the run, so it takes little CPU from the
server.

Extender requests alternate filter and prioritize for one pod (``nodeCacheCapable`` form, N node
names each); pods cycle through a pool of 500: the first filter of each submits it, runs a pass
and commits its nomination to the store (the "first" row); later ones answer from the nomination,
as when kube-scheduler retries. The empty endpoint (a POST of ``{}`` answered ``{}`` through the
same front path as the extender's) is the baseline: it is measured at the same rate in its own
phases of the same run, ``--block`` seconds of empty requests, then as many of extender ones, and
so on (``--seconds`` of each in all), so both see the same machine; ``--interleave`` sends both
streams at once instead (twice the load). Prints p50/p99/max per endpoint, the errors (an answer
other than 200, a dropped connection) and the requests still unanswered 60 s after the last was
due, and the server's CPU time per request in each phase (read from /proc; other load on the
machine inflates it less than the latencies, but a backlog carried into the next phase counts
there).
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import selectors
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections import deque
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))


SIZED_PATH = "/bench/sized"


class _SizedBaseline:
    """``--baseline sized``: a path of the benchmark's own (not of the service) that reads the
    request body as the extender's front does and answers, in turn, a prioritize-sized priority
    list and a nominated filter's short answer, both built before the run: what the same bytes
    cost through uvicorn with no scheduling at all."""

    def __init__(self, app, replies: list[bytes]) -> None:
        self.app, self.replies, self.turn = app, replies, 0

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] != SIZED_PATH:
            await self.app(scope, receive, send)
            return
        more = True
        while more:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            more = message.get("more_body", False)
        payload = self.replies[self.turn % len(self.replies)]
        self.turn += 1
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(payload))]})
        await send({"type": "http.response.body", "body": payload})


def _sized_replies(nodes: int) -> list[bytes]:
    """A nominated filter's answer and a prioritize answer over ``nodes`` names, as the service
    writes them (the benchmark's alternation: filter, prioritize)."""
    from dlsched.service.extender import filter_reply, scores_reply

    names = [f"node-{i:04d}" for i in range(nodes)]
    return [filter_reply(names[:1], "", names, None), scores_reply(names, [i % 10 for i in range(nodes)])]


def _serve(port: int, nodes: int, db: str, loop: str, http: str, eta: float = 0.0, queues: bool = False,
           sized: bool = False) -> None:
    import uvicorn

    from dlsched.registry import make_policy
    from dlsched.service.app import build_app
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    core = SchedulerCore(make_policy("fifo", "consolidate"), Store(db))
    own = nodes // 10 if queues else nodes   # --queues: the pods' VC owns a tenth, borrows the rest
    for i in range(nodes):
        core.node_seen(NodeFacts(f"node-{i:04d}", 8, "default" if i < own else "lender", "", False))
    if queues:   # borrowing and reclaim enforced, as a queue ConfigMap that lets "default" borrow sets it
        from dlsched.kernel.quotas import QueueSpec

        refused = core.set_queues((QueueSpec("default", borrow_limit=None), QueueSpec("lender")))
        assert not refused, refused
    service = LiveService(core, None, token="bench")
    if eta > 0:   # the ETA refresher beside the extender, as `dlsched serve --eta-interval` runs it
        service.eta_interval = eta
        service.start_eta_timer()
    # keep-alive as long as the run: a connection idle between phases is not closed under the client
    app = build_app(service)
    if sized:
        app = _SizedBaseline(app, _sized_replies(nodes))
    uvicorn.run(app, host="127.0.0.1", port=port,
                log_level="warning", access_log=False, loop=loop, http=http, timeout_keep_alive=600)


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


def _request(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n").encode() + body


def _borrowed(port: int) -> dict:
    """With --queues, what borrowing did during the run (``GET /api/v1/queues``): the loans, so a
    run that borrowed nothing cannot pass for a measurement of borrowing."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/queues", timeout=30) as resp:
        report = json.load(resp)
    rows = {r["name"]: r for r in report["queues"]}
    row = rows.get("default", {})
    return {"borrowed_starts": row.get("borrowed_starts"), "borrowed_gpus_at_end": row.get("borrowed_gpus")}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (Linux /proc; NaN elsewhere)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return float("nan")


class _Conn:
    __slots__ = ("active", "buf", "due", "head", "kind", "need", "out", "sock")

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.setblocking(False)
        self.out = b""           # request bytes not yet sent
        self.buf = bytearray()   # answer bytes received
        self.need = -1           # answer length (head + body) once the head is in
        self.head = b""
        self.kind = ""
        self.due = 0.0
        self.active = False      # a request is out on it


def _schedule(rate: float, seconds: float, block: float, interleave: bool, pods: int) -> list[tuple[float, str, int]]:
    """(due time from the start, kind, pod) of every request, in time order."""
    out: list[tuple[float, str, int]] = []
    n = int(rate * seconds)
    if interleave:
        for k in range(n):
            out.append((k / rate, "filter" if k % 2 == 0 else "prioritize", (k // 2) % pods))
            out.append((k / rate, "empty", 0))
        return out
    per_block = max(1, int(rate * block))
    t = 0.0
    done = {"empty": 0, "extender": 0}
    phase = "empty"
    while done["empty"] < n or done["extender"] < n:
        m = min(per_block, n - done[phase])
        for j in range(m):
            k = done[phase] + j
            kind = "empty" if phase == "empty" else ("filter" if k % 2 == 0 else "prioritize")
            out.append((t + j / rate, kind, (k // 2) % pods))
        done[phase] += m
        t += m / rate
        phase = "extender" if phase == "empty" else "empty"
    return out


def run(nodes: int, rate: float, seconds: float, block: float = 5.0, interleave: bool = False, pods: int = 500,
        loop: str = "auto", http: str = "auto", connections: int = 64, eta: float = 0.0,
        queues: bool = False, baseline: str = "empty") -> dict:
    """One measurement. The server's store lives in a temporary folder that is removed afterwards,
    whether the run succeeds or not (the server is stopped first, by its PID)."""
    tmp = tempfile.mkdtemp(prefix="dlsched-bench-")
    servers: list = []
    try:
        return _measure(tmp, servers, nodes, rate, seconds, block, interleave, pods, loop, http, connections,
                        eta, queues, baseline)
    finally:
        for server in servers:
            if server.is_alive():
                server.terminate()
                server.join(10)
        try:
            shutil.rmtree(tmp)
        except OSError as exc:
            print(f"warning: could not remove the benchmark's temporary store {tmp}: {exc}", file=sys.stderr)


def _measure(tmp: str, servers: list, nodes: int, rate: float, seconds: float, block: float, interleave: bool,
             pods: int, loop: str, http: str, connections: int, eta: float, queues: bool,
             baseline: str = "empty") -> dict:
    port = _free_port()
    ctx = mp.get_context("spawn")
    server = ctx.Process(target=_serve, args=(port, nodes, f"sqlite:///{tmp}/bench.db", loop, http, eta, queues,
                                              baseline == "sized"), daemon=True)
    server.start()
    servers.append(server)
    deadline = time.monotonic() + 60
    while True:
        try:
            probe = socket.create_connection(("127.0.0.1", port), timeout=2)
            probe.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            if probe.recv(64).startswith(b"HTTP/1.1 200"):
                probe.close()
                break
        except OSError:
            pass
        if time.monotonic() > deadline or not server.is_alive():
            raise RuntimeError("server did not start")
        time.sleep(0.2)

    names = [f"node-{i:04d}" for i in range(nodes)]
    # as kube-scheduler writes them (Go's json.Marshal of ExtenderArgs: compact, fields in the
    # struct's order Pod, Nodes, NodeNames)
    bodies = [json.dumps({"Pod": _pod(i, 1 + i % 8), "Nodes": None, "NodeNames": names}, separators=(",", ":")).encode()
              for i in range(pods)]
    wire = {"filter": [_request("/scheduler/filter", b) for b in bodies],
            "prioritize": [_request("/scheduler/prioritize", b) for b in bodies],
            "empty": [_request(SIZED_PATH, bodies[0]) if baseline == "sized" else _request("/empty", b"{}")]}
    plan = _schedule(rate, seconds, block, interleave, pods)
    results: dict[str, list[float]] = {"filter": [], "first": [], "prioritize": [], "empty": []}
    seen_pods: set[int] = set()
    errors = {"count": 0, "unanswered": 0}
    waiting: deque[tuple[float, str, int]] = deque()   # due, no connection free yet
    cpu = {"empty": 0.0, "extender": 0.0}
    sel = selectors.DefaultSelector()
    idle: list[_Conn] = []
    busy = 0
    opened = 0
    pool = {"open": 0}

    def new_conn() -> _Conn:
        nonlocal opened
        opened += 1
        pool["open"] += 1
        conn = _Conn(port)
        sel.register(conn.sock, selectors.EVENT_READ, conn)
        return conn

    for _ in range(16):
        idle.append(new_conn())
    opened = 0

    def finish(conn: _Conn, ok: bool) -> None:
        nonlocal busy
        busy -= 1
        conn.active = False
        if ok:
            results[conn.kind].append((time.perf_counter() - conn.due) * 1000.0)
            idle.append(conn)
        else:
            errors["count"] += 1
            sel.unregister(conn.sock)
            conn.sock.close()
            pool["open"] -= 1

    def on_read(conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(1 << 20)
        except BlockingIOError:
            return
        except OSError:
            chunk = b""
        if not chunk:
            if conn.active:
                finish(conn, False)
            else:                 # the server closed an idle kept-alive connection
                idle.remove(conn)
                sel.unregister(conn.sock)
                conn.sock.close()
                pool["open"] -= 1
            return
        conn.buf += chunk
        if conn.need < 0:
            end = conn.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            conn.head = bytes(conn.buf[:end])
            length = 0
            for line in conn.head.split(b"\r\n")[1:]:
                key, _, value = line.partition(b":")
                if key.strip().lower() == b"content-length":
                    length = int(value)
            conn.need = end + 4 + length
        if len(conn.buf) >= conn.need:
            ok = conn.head.startswith(b"HTTP/1.1 200")
            conn.buf.clear()
            conn.need = -1
            finish(conn, ok)

    def on_write(conn: _Conn) -> None:
        try:
            sent = conn.sock.send(conn.out)
        except BlockingIOError:
            return
        except OSError:
            conn.out = b""
            sel.modify(conn.sock, selectors.EVENT_READ, conn)
            finish(conn, False)
            return
        conn.out = conn.out[sent:]
        if not conn.out:
            sel.modify(conn.sock, selectors.EVENT_READ, conn)

    start = time.perf_counter()
    phase, phase_cpu = plan[0][1] == "empty", _cpu_seconds(server.pid)
    i = 0
    while i < len(plan) or busy or waiting:
        now = time.perf_counter()
        while i < len(plan) and start + plan[i][0] <= now:
            due, kind, pod = plan[i]
            if not interleave and (kind == "empty") != phase:   # a phase ends: charge the server's CPU to it
                cpu_now = _cpu_seconds(server.pid)
                cpu["empty" if phase else "extender"] += cpu_now - phase_cpu
                phase, phase_cpu = kind == "empty", cpu_now
            if kind == "filter" and pod not in seen_pods:
                seen_pods.add(pod)
                kind = "first"
            waiting.append((start + due, kind, pod))
            i += 1
        while waiting and (idle or pool["open"] < connections):
            due, kind, pod = waiting.popleft()
            conn = idle.pop() if idle else new_conn()
            conn.kind, conn.due = kind, due
            conn.out = wire["filter" if kind == "first" else kind][pod if kind != "empty" else 0]
            conn.active = True
            busy += 1
            sel.modify(conn.sock, selectors.EVENT_READ | selectors.EVENT_WRITE, conn)
            on_write(conn)
        if i < len(plan):
            timeout = max(0.0, start + plan[i][0] - time.perf_counter())
        else:
            timeout = 1.0
            if time.perf_counter() - start > plan[-1][0] + 60:
                errors["unanswered"] = busy + len(waiting)
                break
        for key, events in sel.select(timeout):
            conn = key.data
            if events & selectors.EVENT_WRITE and conn.out:
                on_write(conn)
            if events & selectors.EVENT_READ:
                on_read(conn)
    elapsed = time.perf_counter() - start
    if not interleave:
        cpu["empty" if phase else "extender"] += _cpu_seconds(server.pid) - phase_cpu
    borrowed = _borrowed(port) if queues else None
    server.terminate()
    server.join(10)

    def summary(xs: list[float]) -> dict:
        xs = sorted(xs)
        if not xs:
            return {"n": 0}
        return {"n": len(xs), "p50_ms": round(statistics.median(xs), 3),
                "p99_ms": round(xs[min(len(xs) - 1, int(0.99 * len(xs)))], 3), "max_ms": round(xs[-1], 3)}

    out = {"nodes": nodes, "rate_per_s": rate, "seconds": seconds, "mode": "interleaved" if interleave else
           f"phases of {block:g} s", "queues": "borrowing" if queues else "fixed VCs", "loop": loop, "http": http, "errors": errors["count"],
           "unanswered": errors["unanswered"], "baseline": baseline,
           "connections_opened_during_run": opened, "elapsed_s": round(elapsed, 1),
           "filter_all": summary(results["filter"] + results["first"]), "borrowing": borrowed,
           **{k: summary(v) for k, v in results.items()}}
    if not interleave:
        n = int(rate * seconds)
        out["server_cpu_ms_per_request"] = {k: round(1000.0 * v / n, 3) for k, v in cpu.items()}
    return out


def _uvicorn_choice(loop: str, http: str) -> tuple[str, str]:
    """What uvicorn's 'auto' picks here (uvloop / httptools when installed)."""
    def have(module: str) -> bool:
        try:
            __import__(module)
        except ImportError:
            return False
        return True
    return (loop if loop != "auto" else ("uvloop" if have("uvloop") else "asyncio"),
            http if http != "auto" else ("httptools" if have("httptools") else "h11"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=1000)
    ap.add_argument("--rate", type=float, default=200.0, help="extender (and empty) requests per second")
    ap.add_argument("--seconds", type=float, default=60.0, help="seconds of extender load (and as many of empty)")
    ap.add_argument("--block", type=float, default=5.0, help="seconds per phase before switching endpoint")
    ap.add_argument("--interleave", action="store_true", help="send the empty requests at the same time instead")
    ap.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"], help="uvicorn's event loop")
    ap.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"], help="uvicorn's HTTP parser")
    ap.add_argument("--connections", type=int, default=64, help="most connections the client opens")
    ap.add_argument("--eta", type=float, default=0.0, metavar="SECONDS",
                    help="run the ETA refresher every SECONDS beside the extender (0: off)")
    ap.add_argument("--queues", action="store_true",
                    help="queues that borrow: the pods' VC owns a tenth of the nodes and borrows from the rest")
    ap.add_argument("--baseline", default="empty", choices=["empty", "sized"],
                    help="the baseline endpoint: empty (a POST of {} answered {}) or sized (the extender's "
                         "request bodies read and answered with replies of the extender's sizes, no scheduling)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    loop, http = _uvicorn_choice(args.loop, args.http)
    out = run(args.nodes, args.rate, args.seconds, args.block, args.interleave, loop=loop, http=http,
              connections=args.connections, eta=args.eta, queues=args.queues, baseline=args.baseline)
    if args.json:
        print(json.dumps(out))
        return
    base = "empty" if args.baseline == "empty" else "sized"
    print(f"{out['nodes']} nodes, {out['rate_per_s']:g} extender requests/s for {out['seconds']:g} s, {base} ones "
          f"at the same rate ({out['mode']}; {out['queues']}); uvicorn {loop} + {http}; errors: {out['errors']}, "
          f"unanswered: {out['unanswered']}; "
          f"connections opened under load: {out['connections_opened_during_run']}; "
          f"all answered after {out['elapsed_s']:g} s")
    if out["borrowing"] is not None:
        print(f"borrowing: {out['borrowing']['borrowed_starts']} borrowed starts, "
              f"{out['borrowing']['borrowed_gpus_at_end']} GPUs on loan at the end")
    print(f"{'endpoint':<20}{'requests':>10}{'p50 ms':>12}{'p99 ms':>12}{'max ms':>12}")
    rows = (("filter", "filter_all"), ("  first of a pod", "first"), ("  repeated", "filter"),
            ("prioritize", "prioritize"), (base, "empty"))
    for label, key in rows:
        s = out[key]
        print(f"{label:<20}{s.get('n', 0):>10}{s.get('p50_ms', float('nan')):>12.2f}"
              f"{s.get('p99_ms', float('nan')):>12.2f}{s.get('max_ms', float('nan')):>12.2f}")
    if "server_cpu_ms_per_request" in out:
        c = out["server_cpu_ms_per_request"]
        print(f"server CPU per request: extender {c['extender']:.3f} ms, {base} {c['empty']:.3f} ms")


if __name__ == "__main__":
    main()
