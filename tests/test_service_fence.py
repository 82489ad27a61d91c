"""The socket-level fence (service/fence.py): a write whose call-time leadership check passed is
still not sent when the renew deadline passes before its bytes leave; reads, watches and Lease
writes pass. Against a real HTTP server on 127.0.0.1 through the official client's own pools."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

pytest.importorskip("kubernetes")

from kubernetes import client  # noqa: E402

from dlsched.service.fence import SocketFence  # noqa: E402
from dlsched.service.kube import FencedApi, NotLeader  # noqa: E402


class _Recorder(BaseHTTPRequestHandler):
    seen: list[tuple[str, str]] = []

    def _answer(self) -> None:
        length = int(self.headers.get("content-length") or 0)
        if length:
            self.rfile.read(length)
        type(self).seen.append((self.command, self.path))
        body = json.dumps({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}).encode()
        self.send_response(200 if self.command != "POST" else 201)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _answer

    def log_message(self, *args) -> None:   # quiet
        pass


@pytest.fixture
def server():
    _Recorder.seen = []
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def _api(url: str) -> client.ApiClient:
    cfg = client.Configuration()
    cfg.host = url
    return client.ApiClient(cfg)


def _binding() -> dict:
    return {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"},
            "target": {"apiVersion": "v1", "kind": "Node", "name": "n1"}}


def test_a_write_checked_at_its_call_is_not_sent_when_the_deadline_passes_before_its_bytes_leave(server):
    """The race the paused-leader test caught: the call's check says "leader", the process stops,
    and by the time the request is written the replica no longer leads."""
    answers = iter([True, False])   # the call's check passes; the socket's, a moment later, does not
    api_client = _api(server)
    fence = SocketFence(lambda: next(answers, False))
    fence.install(api_client)
    core = FencedApi(client.CoreV1Api(api_client), fence.may_write)
    with pytest.raises(NotLeader):
        core.create_namespaced_binding("default", _binding(), _preload_content=False)
    assert _Recorder.seen == [] and fence.refused == 1


def test_without_the_socket_fence_that_write_goes_out(server):
    """The same race on a client without the socket fence (main before the fix): the write is sent."""
    answers = iter([True, False])
    core = FencedApi(client.CoreV1Api(_api(server)), lambda: next(answers, False))
    core.create_namespaced_binding("default", _binding(), _preload_content=False)
    assert _Recorder.seen == [("POST", "/api/v1/namespaces/default/bindings")]


def test_reads_and_lease_writes_pass_a_replica_that_does_not_lead(server):
    api_client = _api(server)
    fence = SocketFence(lambda: False)
    fence.install(api_client)
    client.CoreV1Api(api_client).list_namespaced_pod("default", _preload_content=False)
    lease = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": "dlsched"},
             "spec": {"holderIdentity": "b"}}
    client.CoordinationV1Api(api_client).replace_namespaced_lease("dlsched", "default", lease,
                                                                   _preload_content=False)
    for call in (lambda c: c.patch_namespaced_pod("p", "default", {"metadata": {}}, _preload_content=False),
                 lambda c: c.delete_namespaced_pod("p", "default", _preload_content=False)):
        with pytest.raises(NotLeader):
            call(client.CoreV1Api(api_client))
    assert _Recorder.seen == [("GET", "/api/v1/namespaces/default/pods"),
                              ("PUT", "/apis/coordination.k8s.io/v1/namespaces/default/leases/dlsched")]
    assert fence.refused == 2
