"""The API client's connections share one TLS context (service/kube.py: share_tls_context).

Without it urllib3 made a context per new connection and loaded the system CA store into it
(27 ms of CPU each here, with verification off too). These tests open several connections at
once to a real HTTPS server on 127.0.0.1 (a certificate made with openssl) and count what is
built per connection, and check that verification still works as configured: the CA file is
trusted, another CA is refused, no CA file means the system store (which refuses a self-signed
server), and insecure connects.
"""

from __future__ import annotations

import json
import shutil
import ssl
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from dlsched.service import kube
from dlsched.service.gpu_binding.certs import make_self_signed

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command")

BODY = json.dumps({"kind": "ConfigMap", "apiVersion": "v1",
                   "metadata": {"name": "x", "namespace": "default"}, "data": {"k": "v"}}).encode()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"   # keep-alive: a connection goes back to the client's pool

    def do_GET(self):  # noqa: N802 - http.server's name
        time.sleep(0.2)   # the calls overlap, so the client opens one connection per call
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass


@pytest.fixture
def server(tmp_path):
    tls = make_self_signed(["127.0.0.1"], tmp_path)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tls.cert, tls.key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    ca = tmp_path / "ca.crt"
    ca.write_bytes(tls.ca_pem)
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", ca
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(5)


@pytest.fixture
def counts(monkeypatch):
    """How many TLS contexts urllib3 builds for connections, and how often a CA store is loaded."""
    import urllib3.connection

    seen = {"contexts": 0, "system_store": 0}
    build, load = urllib3.connection.create_urllib3_context, ssl.SSLContext.load_default_certs

    def counted_build(*args, **kwargs):
        seen["contexts"] += 1
        return build(*args, **kwargs)

    def counted_load(self, *args, **kwargs):
        seen["system_store"] += 1
        return load(self, *args, **kwargs)

    monkeypatch.setattr(urllib3.connection, "create_urllib3_context", counted_build)
    monkeypatch.setattr(ssl.SSLContext, "load_default_certs", counted_load)
    return seen


def _read_at_once(api, n: int = 6) -> list:
    """``n`` reads at the same moment from ``n`` threads: the results, or the exceptions."""
    out: list = [None] * n
    start = threading.Barrier(n)

    def one(i: int) -> None:
        start.wait()
        try:
            out[i] = api.read_namespaced_config_map("x", "default").data
        except Exception as exc:  # noqa: BLE001 - the test inspects it
            out[i] = exc
    threads = [threading.Thread(target=one, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


def _connections(api) -> int:
    pools = api.api_client.rest_client.pool_manager.pools
    return sum(pools[key].num_connections for key in pools.keys())  # noqa: SIM118 - urllib3's container is not iterable


def test_connections_with_a_ca_file_share_one_context_and_load_no_system_store(server, counts):
    url, ca = server
    api = kube.make_api(api_server=url, token="t", ca_file=str(ca))
    assert _read_at_once(api) == [{"k": "v"}] * 6
    assert _connections(api) >= 3   # the calls did open several connections
    assert counts == {"contexts": 0, "system_store": 0}


def test_without_the_shared_context_every_connection_loads_the_store(server, counts, monkeypatch):
    """The cost the shared context removes (the measurement's before), with verification off."""
    monkeypatch.setattr(kube, "share_tls_context", lambda api_client: None)
    url, _ = server
    api = kube.make_api(api_server=url, token="t", insecure=True)
    assert _read_at_once(api) == [{"k": "v"}] * 6
    opened = _connections(api)
    assert opened >= 3
    assert counts == {"contexts": opened, "system_store": opened}


def test_insecure_connects_without_any_store(server, counts):
    url, _ = server
    api = kube.make_api(api_server=url, token="t", insecure=True)
    assert _read_at_once(api, 3) == [{"k": "v"}] * 3
    assert counts == {"contexts": 0, "system_store": 0}


def test_verification_still_refuses_another_ca(server, tmp_path, counts):
    url, _ = server
    (tmp_path / "other").mkdir()
    other = make_self_signed(["127.0.0.1"], tmp_path / "other")
    wrong = tmp_path / "wrong-ca.crt"
    wrong.write_bytes(other.ca_pem)
    api = kube.make_api(api_server=url, token="t", ca_file=str(wrong))
    [failed] = _read_at_once(api, 1)
    assert isinstance(failed, Exception) and "CERTIFICATE_VERIFY_FAILED" in str(failed)


def test_no_ca_file_means_the_system_store_loaded_once(server, counts):
    url, _ = server
    api = kube.make_api(api_server=url, token="t")
    assert counts["system_store"] == 1   # at make_api, once for every connection to come
    results = _read_at_once(api, 3)
    assert all(isinstance(r, Exception) and "CERTIFICATE_VERIFY_FAILED" in str(r) for r in results)
    assert counts == {"contexts": 0, "system_store": 1}
