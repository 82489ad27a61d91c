"""What a replica that does not lead does with the HTTP calls it receives: it forwards them.

kube-scheduler is configured with one extender URL, normally a Service in front of every
replica, so a filter, prioritize or bind call may reach any of them. A follower holds no state
(its core is built only when it becomes leader), so :class:`LeaderGate` passes each call on to
the leader's URL, advertised in the Lease, and answers with the leader's reply, status and body
unchanged. The operator API (``/api/v1/*``, ``/dashboard``) is forwarded the same way, so an
operator behind the Service always reads the leader's state. What each replica answers itself:
``/healthz``, ``/metrics`` (its own ``dlsched_leader``), ``/api/v1/leader`` and the API schema.

A forwarded request carries ``X-Dlsched-Forwarded-By``; a replica that receives one without
leading answers 503 instead of forwarding again (no loops while the lease changes hands). With no
leader known (the lease expired, the new leader still rebuilding its state) or the leader
unreachable, the answer is 503 with the reason: kube-scheduler counts a failed extender call as
a failed scheduling attempt and retries the pod after its back-off.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import logging
from urllib.parse import urlsplit

log = logging.getLogger("dlsched.service.follower")

FORWARDED_HEADER = b"x-dlsched-forwarded-by"
LOCAL_PATHS = ("/healthz", "/metrics", "/api/v1/leader", "/openapi.json", "/docs", "/docs/oauth2-redirect",
               "/redoc")
PASS_HEADERS = (b"content-type", b"authorization", b"accept")
MAX_BODY = 32 * 1024 * 1024 + 1   # the extender's limit (app.EXTENDER_MAX_BYTES), +1 so the leader refuses it
FORWARD_TIMEOUT_S = 30.0


class LeaderGate:
    """ASGI wrapper of the service's app: calls pass through while this replica leads (and always
    for :data:`LOCAL_PATHS`); otherwise they are forwarded to the leader."""

    def __init__(self, app, service) -> None:
        self.app, self.service = app, service
        self.counts = service.forwarding   # forwarded: answered by the leader; refused: 503 here

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or scope["path"] in LOCAL_PATHS or self.service.leading():
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        if scope["method"] in ("POST", "PUT", "PATCH") and b"content-length" not in headers:
            await self.app(scope, receive, send)   # refused here as the leader would (411)
            return
        elector = self.service.elector
        holder, url = elector.leader() if elector is not None else ("", "")
        if FORWARDED_HEADER in headers:
            await self._refuse(send, f"forwarded by {headers[FORWARDED_HEADER].decode(errors='replace')} to "
                                     f"{_identity(elector)}, which does not lead (now: {holder or 'none known'})")
            return
        if not url or holder == _identity(elector):
            if scope["path"] == "/api/v1/state" and scope["method"] == "GET":
                await self.app(scope, receive, send)   # no leader to ask: this replica's own (empty) view
                return
            await self._refuse(send, "no dlsched leader is known right now (the lease is changing hands); "
                                     "retry shortly")
            return
        body = await _read(receive)
        if body is None:
            return
        path = scope["path"] + (("?" + scope["query_string"].decode()) if scope.get("query_string") else "")
        out = {k.decode(): v.decode(errors="replace") for k, v in headers.items() if k in PASS_HEADERS}
        out[FORWARDED_HEADER.decode()] = _identity(elector)
        try:
            status, ctype, payload = await asyncio.to_thread(_forward, url, scope["method"], path, out, body)
        except (OSError, http.client.HTTPException, ValueError) as exc:
            await self._refuse(send, f"the dlsched leader {holder} at {url} did not answer: {exc}")
            return
        self.counts["forwarded"] += 1
        await _reply(send, status, payload, ctype)

    async def _refuse(self, send, why: str) -> None:
        self.counts["refused"] += 1
        await _reply(send, 503, json.dumps({"detail": why, "Error": why}).encode(), b"application/json")


def _identity(elector) -> str:
    return elector.identity if elector is not None else ""


def _forward(url: str, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, bytes]:
    """One request to the leader (a fresh connection: the leader may change between calls)."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"advertised URL {url!r} is not http(s)://HOST:PORT")
    conn_cls = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    conn = conn_cls(parts.hostname, parts.port, timeout=FORWARD_TIMEOUT_S)
    try:
        conn.request(method, parts.path.rstrip("/") + path, body=body if method not in ("GET", "HEAD") else None,
                     headers=headers)
        resp = conn.getresponse()
        return resp.status, (resp.getheader("content-type") or "application/json").encode(), resp.read()
    finally:
        conn.close()


async def _read(receive) -> bytes | None:
    """The request body, at most :data:`MAX_BODY` bytes (the leader refuses what is over its
    limit); None when the client went away."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        if size < MAX_BODY:
            chunks.append(chunk[:MAX_BODY - size])
        size += len(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _reply(send, status: int, payload: bytes, ctype: bytes) -> None:
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", ctype), (b"content-length", b"%d" % len(payload))]})
    await send({"type": "http.response.body", "body": payload})
