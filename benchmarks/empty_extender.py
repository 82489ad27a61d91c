"""The cheapest extender this server stack can be: the live benchmarks' floor for the extender's
round trip, measured in the same run as dlsched (the "empty endpoint" baseline of a drain).

    PYTHONPATH=src .venv/bin/python benchmarks/empty_extender.py --port P --api-server URL --api-token T

Same stack as ``dlsched serve`` (uvicorn with uvloop and httptools when installed, a plain ASGI app
with no framework), and no state: ``filter`` passes the first node kube-scheduler offers (its own
filters have checked the GPUs already, ``ignoredByScheduler: false``; one node passing, kube-scheduler
skips ``prioritize``), ``prioritize`` scores every node 0, ``bind`` posts the Binding to the API
server from a pool of threads, one keep-alive connection each. No watch, no store, no policy: what
an attempt through it costs beyond kube-scheduler alone is the HTTP round trip between the two
processes on this machine, which no extender can avoid."""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import ssl
import sys
import threading
import urllib.parse
import urllib.request
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from support.service_proc import ChildServer  # noqa: E402 - after the sys.path line above

USER_AGENT = "empty-extender"
BIND_WORKERS = 16


def offered_names(args: dict) -> list[str]:
    """The node names ExtenderArgs offers: ``NodeNames`` (nodeCacheCapable) or ``Nodes.items``."""
    names = args.get("NodeNames")
    if names is None:
        names = [n["metadata"]["name"] for n in (args.get("Nodes") or {}).get("items", [])]
    return names


def filter_reply(args: dict) -> dict:
    """ExtenderFilterResult passing the first offered node, in the form it was offered."""
    if not offered_names(args):
        return {"NodeNames": [], "FailedNodes": {}, "Error": "no node offered"}
    if args.get("NodeNames") is not None:
        return {"NodeNames": args["NodeNames"][:1], "FailedNodes": {}, "Error": ""}
    return {"Nodes": {"items": args["Nodes"]["items"][:1]}, "FailedNodes": {}, "Error": ""}


def prioritize_reply(args: dict) -> list[dict]:
    """HostPriorityList: every offered node 0."""
    return [{"Host": n, "Score": 0} for n in offered_names(args)]


def binding_body(args: dict) -> tuple[str, dict]:
    """(API path, Binding) for ExtenderBindingArgs."""
    ns, name, node = args["PodNamespace"], args["PodName"], args["Node"]
    body = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": name, "namespace": ns},
            "target": {"apiVersion": "v1", "kind": "Node", "name": node}}
    if args.get("PodUID"):
        body["metadata"]["uid"] = args["PodUID"]
    path = f"/api/v1/namespaces/{urllib.parse.quote(ns)}/pods/{urllib.parse.quote(name)}/binding"
    return path, body


class Binder:
    """Posts Bindings, one keep-alive HTTPS connection per worker thread."""

    def __init__(self, api_url: str, token: str) -> None:
        parts = urllib.parse.urlsplit(api_url)
        self.host, self.port, self.https = parts.hostname or "127.0.0.1", parts.port, parts.scheme == "https"
        self.headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json",
                        "User-Agent": USER_AGENT}
        self.ctx = ssl._create_unverified_context() if self.https else None   # the test CA, loopback only
        self.local = threading.local()

    def _conn(self) -> http.client.HTTPConnection:
        conn = getattr(self.local, "conn", None)
        if conn is None:
            conn = (http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=10) if self.https
                    else http.client.HTTPConnection(self.host, self.port, timeout=10))
            self.local.conn = conn
        return conn

    def bind(self, args: dict) -> str:
        """'' on success, else the API server's answer."""
        path, body = binding_body(args)
        for attempt in (0, 1):   # a keep-alive connection the server closed: reconnect once
            conn = self._conn()
            try:
                conn.request("POST", path, json.dumps(body), self.headers)
                resp = conn.getresponse()
                text = resp.read().decode(errors="replace")
            except (OSError, http.client.HTTPException):
                conn.close()
                self.local.conn = None
                if attempt:
                    raise
                continue
            return "" if resp.status == 201 else f"{resp.status}: {text[:200]}"
        return "unreachable"


class EmptyExtender:
    """The ASGI app: POST /scheduler/{filter,prioritize,bind}, GET /healthz."""

    def __init__(self, bind: Callable[[dict], str], workers: int = BIND_WORKERS) -> None:
        self.bind = bind
        self.pool = ThreadPoolExecutor(workers, thread_name_prefix="bind")
        self.calls = {"filter": 0, "prioritize": 0, "bind": 0}

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":
            return
        path = scope["path"]
        if scope["method"] == "GET" and path == "/healthz":
            await _reply(send, 200, {"ok": True})
            return
        if scope["method"] == "GET" and path == "/calls":
            await _reply(send, 200, self.calls)
            return
        verb = path.removeprefix("/scheduler/")
        if scope["method"] != "POST" or verb not in self.calls:
            await _reply(send, 404, {"detail": "not found"})
            return
        raw = await _read(receive)
        try:
            args = json.loads(raw)
        except ValueError:
            await _reply(send, 400, {"detail": "not JSON"})
            return
        self.calls[verb] += 1
        if verb == "filter":
            await _reply(send, 200, filter_reply(args))
        elif verb == "prioritize":
            await _reply(send, 200, prioritize_reply(args))
        else:
            try:
                error = await asyncio.get_running_loop().run_in_executor(self.pool, self.bind, args)
            except (KeyError, TypeError, OSError, http.client.HTTPException) as exc:
                error = f"bind failed: {exc}"
            await _reply(send, 200, {"Error": error})


async def _read(receive) -> bytes:
    chunks = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _reply(send, status: int, payload) -> None:
    body = json.dumps(payload).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"), (b"content-length", b"%d" % len(body))]})
    await send({"type": "http.response.body", "body": body})


class EmptyExtenderProcess(ChildServer):
    """This module as a child process on ``port`` (the benchmarks' extender URL), stopped by its PID."""

    label = "empty extender"
    ready_s = 30.0

    def __init__(self, port: int, api_url: str, api_token: str, log: Path) -> None:
        super().__init__(port, [sys.executable, str(Path(__file__).resolve()), "--port", str(port),
                                "--api-server", api_url, "--api-token", api_token], log)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--api-server", required=True)
    ap.add_argument("--api-token", required=True)
    args = ap.parse_args(argv)
    import uvicorn

    binder = Binder(args.api_server, args.api_token)
    uvicorn.run(EmptyExtender(binder.bind), host="127.0.0.1", port=args.port, log_level="warning", access_log=False)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
