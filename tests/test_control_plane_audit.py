"""What the real API server's audit log says of a write request cut short, which the paused-leader
test (tests/test_service_ha_k8s.py) tells apart from an executed write: dlsched's socket fence
(service/fence.py) refuses a write's later chunks once the renew deadline has passed, so a replica
paused between its headers and its body leaves a request the API server never received whole."""

from __future__ import annotations

import json
import socket
import ssl
import time
from urllib.parse import urlparse

from support.control_plane import audit_writes, cut_short, extender_control_plane


def _send_part(cp, agent: str, body: bytes, sent: int) -> None:
    """A PATCH of pod p1 whose headers announce ``body`` and of which ``sent`` bytes leave."""
    url = urlparse(cp.api_url)
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    with ctx.wrap_socket(socket.create_connection((url.hostname, url.port)), server_hostname=url.hostname) as s:
        s.sendall((f"PATCH /api/v1/namespaces/default/pods/p1 HTTP/1.1\r\nHost: {url.hostname}\r\n"
                   f"Authorization: Bearer {cp.token}\r\nContent-Type: application/merge-patch+json\r\n"
                   f"User-Agent: {agent}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body[:sent])
        time.sleep(0.3)   # the API server is waiting for the rest when the connection goes


def test_a_write_cut_short_is_answered_500_without_a_message_and_changes_nothing(shared):
    with extender_control_plane(shared, audit=True) as (cp, _):
        pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p1"},
               "spec": {"containers": [{"name": "c", "image": "x"}]}}
        assert cp.request("POST", "/api/v1/namespaces/default/pods", pod)[0] == 201
        body = json.dumps({"metadata": {"annotations": {"cut": "yes"}}}).encode()
        _send_part(cp, "cut-headers", body, 0)
        _send_part(cp, "cut-half", body, len(body) // 2)
        status, _ = cp.request("PATCH", "/api/v1/namespaces/default/pods/p1",
                               {"metadata": {"annotations": {"whole": "yes"}}},
                               content_type="application/merge-patch+json")
        assert status == 200
        status, _ = cp.request("PATCH", "/api/v1/namespaces/default/pods/p1", {"spec": {"nodeName": 7}},
                               content_type="application/merge-patch+json")
        assert status >= 400   # executed and refused: not cut short
        deadline = time.monotonic() + 10
        while True:
            patches = [e for e in audit_writes(cp) if e.get("verb") == "patch"
                       and (e.get("objectRef") or {}).get("name") == "p1"]
            events = {e.get("userAgent", ""): e for e in patches}
            if {"cut-headers", "cut-half"} <= set(events) or time.monotonic() > deadline:
                break
            time.sleep(0.2)
        _, now = cp.request("GET", "/api/v1/namespaces/default/pods/p1")
    assert cut_short(events["cut-headers"]) and cut_short(events["cut-half"])
    assert now["metadata"]["annotations"] == {"whole": "yes"}   # neither cut write changed the pod
    executed = [e for e in patches if not e.get("userAgent", "").startswith(("cut-", "kube-scheduler"))]
    assert sorted(e["responseStatus"]["code"] >= 400 for e in executed) == [False, True]
    assert not any(cut_short(e) for e in executed)
