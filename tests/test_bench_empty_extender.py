"""benchmarks/empty_extender.py, the live benchmarks' floor for the extender's round trip: it must
answer kube-scheduler's three verbs as an extender does (one node passing, so that kube-scheduler
skips prioritize; every node scored; the Binding posted), or the floor it prints measures something
else. The ASGI app is driven as uvicorn drives it; the Binder posts to a local HTTP server."""

from __future__ import annotations

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.benchmarks import load_benchmark


@pytest.fixture(scope="module")
def ext():
    return load_benchmark("empty_extender")


def call(app, method: str, path: str, body: bytes = b"") -> tuple[int, object]:
    """One request through the ASGI app; (status, decoded JSON reply)."""
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    asyncio.run(app({"type": "http", "method": method, "path": path, "headers": []}, receive, send))
    return sent[0]["status"], json.loads(sent[1]["body"])


def test_filter_passes_the_first_offered_node_in_both_forms(ext):
    app = ext.EmptyExtender(lambda args: "")
    names = {"Pod": {}, "NodeNames": ["n3", "n1", "n2"]}
    assert call(app, "POST", "/scheduler/filter", json.dumps(names).encode()) == (
        200, {"NodeNames": ["n3"], "FailedNodes": {}, "Error": ""})
    nodes = {"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "a"}}, {"metadata": {"name": "b"}}]}}
    assert call(app, "POST", "/scheduler/filter", json.dumps(nodes).encode()) == (
        200, {"Nodes": {"items": [{"metadata": {"name": "a"}}]}, "FailedNodes": {}, "Error": ""})
    status, reply = call(app, "POST", "/scheduler/filter", b'{"Pod": {}, "NodeNames": []}')
    assert status == 200 and reply["NodeNames"] == [] and reply["Error"] == "no node offered"
    assert app.calls == {"filter": 3, "prioritize": 0, "bind": 0}


def test_prioritize_scores_every_offered_node_zero(ext):
    app = ext.EmptyExtender(lambda args: "")
    status, reply = call(app, "POST", "/scheduler/prioritize", b'{"Pod": {}, "NodeNames": ["x", "y"]}')
    assert (status, reply) == (200, [{"Host": "x", "Score": 0}, {"Host": "y", "Score": 0}])


def test_bind_runs_off_the_event_loop_and_reports_the_binder_answer(ext):
    seen: list[tuple[dict, str]] = []

    def bind(args):
        seen.append((args, threading.current_thread().name))
        return "" if args["PodName"] == "ok" else "409: conflict"

    app = ext.EmptyExtender(bind, workers=2)
    body = {"PodName": "ok", "PodNamespace": "ns", "PodUID": "u1", "Node": "n1"}
    assert call(app, "POST", "/scheduler/bind", json.dumps(body).encode()) == (200, {"Error": ""})
    body["PodName"] = "taken"
    assert call(app, "POST", "/scheduler/bind", json.dumps(body).encode()) == (200, {"Error": "409: conflict"})
    assert [a["PodName"] for a, _ in seen] == ["ok", "taken"]
    assert all(name.startswith("bind") for _, name in seen)      # the pool's threads, not the loop's


def test_bad_requests_are_answered_not_raised(ext):
    app = ext.EmptyExtender(lambda args: ext.binding_body(args) and "")   # reads the pod's name as Binder does
    assert call(app, "POST", "/scheduler/filter", b"{not json")[0] == 400
    assert call(app, "POST", "/scheduler/nope", b"{}")[0] == 404
    assert call(app, "GET", "/healthz") == (200, {"ok": True})
    # a bind body without the pod's name: the extender's error field, not a 500
    status, reply = call(app, "POST", "/scheduler/bind", b'{"Node": "n1"}')
    assert status == 200 and reply["Error"].startswith("bind failed")


class _Recorder(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"      # keep-alive, as the API server
    requests: list[tuple[str, str, dict, str]] = []
    status = 201

    def do_POST(self):  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append((self.path, self.headers["Authorization"], body, self.headers["User-Agent"]))
        reply = b'{"kind": "Status"}'
        self.send_response(type(self).status)
        self.send_header("Content-Length", str(len(reply)))
        self.end_headers()
        self.wfile.write(reply)

    def log_message(self, *args):
        pass


def test_binder_posts_the_binding_with_the_token_on_one_connection(ext):
    _Recorder.requests = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        binder = ext.Binder(f"http://127.0.0.1:{server.server_address[1]}", "tok")
        args = {"PodName": "p 1", "PodNamespace": "ns", "PodUID": "uid-1", "Node": "node-7"}
        assert binder.bind(args) == ""
        conn = binder.local.conn
        _Recorder.status = 409
        assert binder.bind({**args, "PodUID": ""}).startswith("409")
        assert binder.local.conn is conn                        # kept alive, reused
    finally:
        _Recorder.status = 201
        server.shutdown()
        server.server_close()
    (path, auth, body, agent), (_, _, second, _) = _Recorder.requests
    assert path == "/api/v1/namespaces/ns/pods/p%201/binding" and auth == "Bearer tok"
    assert agent == ext.USER_AGENT                      # the audit log counts it apart from dlsched
    assert body == {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p 1", "namespace": "ns",
                                                                        "uid": "uid-1"},
                    "target": {"apiVersion": "v1", "kind": "Node", "name": "node-7"}}
    assert "uid" not in second["metadata"]


def test_bench_bind_latency_runs_the_empty_phase_before_dlsched_restarts(ext):
    from support.benchmarks import ROOT

    text = (ROOT / "benchmarks" / "bench_bind_latency.py").read_text()
    loop = text[text.index("for mode in modes:"):text.index("finished = True")]
    assert loop.index("svc.stop()") < loop.index("empty_phase(") < loop.index("svc = service()") \
        < loop.index('f"gpu-{mode}"')
    helper = text[text.index("def empty_phase("):text.index("def empty_lines(")]
    assert helper.index("EmptyExtenderProcess(") < helper.index("run_phase(") < helper.index("ext.stop()")
