"""The mutating admission webhook, served by dlsched over TLS on a port of its own, and its
registration (a ``MutatingWebhookConfiguration`` whose ``caBundle`` is the webhook's CA).

Mutation is stateless (``mutation.plan``), so every replica serves it, leader or not. The
registration matches pod CREATEs cluster-wide (v1.20 cannot select by ``schedulerName``; the
handler returns other schedulers' pods untouched) with ``failurePolicy: Ignore``: a webhook
that is down never blocks the cluster's pods; a dlsched pod admitted unmutated keeps its
``nvidia.com/gpu`` request and is reported at bind as one whose GPUs dlsched does not choose.
"""

from __future__ import annotations

import base64
import json
import logging
import ssl
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from dlsched.service.gpu_binding.certs import WebhookTls
from dlsched.service.gpu_binding.mutation import review_response

log = logging.getLogger("dlsched.service")
WEBHOOK_NAME = "gpus.dlsched.io"
MAX_REVIEW_BYTES = 4 << 20   # the API server's own request limit is 3 MiB


class WebhookServer:
    """HTTPS server answering ``POST /mutate`` with an AdmissionReview (see the module doc)."""

    def __init__(self, host: str, port: int, tls: WebhookTls, scheduler_name: str) -> None:
        self.scheduler_name = scheduler_name
        self.tls = tls
        self.counts = {"mutated": 0, "passed": 0, "left_alone": 0, "bad_requests": 0}
        self.left: list[str] = []   # the latest reasons a pod of dlsched's was left unmutated
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                outer._handle(self)

            def log_message(self, *args) -> None:   # quiet: counted instead
                return

        self.httpd = ThreadingHTTPServer((host, port), Handler)
        self.httpd.daemon_threads = True
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(str(tls.cert), str(tls.key))
        self.httpd.socket = ctx.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]

    def _handle(self, req: BaseHTTPRequestHandler) -> None:
        size = int(req.headers.get("Content-Length") or 0)
        if req.path.split("?")[0] != "/mutate" or not 0 < size <= MAX_REVIEW_BYTES:
            self.counts["bad_requests"] += 1
            req.send_error(404 if req.path.split("?")[0] != "/mutate" else 413)
            return
        try:
            review = json.loads(req.rfile.read(size))
            body, outcome = review_response(review, self.scheduler_name)
        except (ValueError, AttributeError, TypeError) as exc:
            self.counts["bad_requests"] += 1
            req.send_error(400, f"not an AdmissionReview: {exc}")
            return
        key = "mutated" if outcome == "mutated" else "passed" if outcome == "passed" else "left_alone"
        self.counts[key] += 1
        if key == "left_alone":
            self.left = [*self.left[-19:], outcome]
            log.warning("webhook: pod left unmutated: %s", outcome)
        raw = json.dumps(body).encode()
        req.send_response(200)
        req.send_header("Content-Type", "application/json")
        req.send_header("Content-Length", str(len(raw)))
        req.end_headers()
        req.wfile.write(raw)

    def start(self) -> None:
        threading.Thread(target=self.httpd.serve_forever, name="webhook", daemon=True).start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


def registration(url: str, ca_pem: bytes, name: str = WEBHOOK_NAME) -> dict:
    """The MutatingWebhookConfiguration calling ``url`` (see the module doc)."""
    return {
        "apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": "dlsched"}},
        "webhooks": [{
            "name": WEBHOOK_NAME, "admissionReviewVersions": ["v1"], "sideEffects": "None",
            "failurePolicy": "Ignore", "timeoutSeconds": 5, "reinvocationPolicy": "Never",
            "clientConfig": {"url": url, "caBundle": base64.b64encode(ca_pem).decode()},
            "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                       "resources": ["pods"], "scope": "Namespaced"}],
        }],
    }


def register(api_client, body: dict) -> str:
    """Create or replace the registration; 'created' or 'replaced' (raises the API's error)."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    adm = client.AdmissionregistrationV1Api(api_client)
    name = body["metadata"]["name"]
    try:
        adm.create_mutating_webhook_configuration(body, _preload_content=False).read()
        return "created"
    except ApiException as exc:
        if exc.status != 409:
            raise
    current = json.loads(adm.read_mutating_webhook_configuration(name, _preload_content=False).read())
    body = {**body, "metadata": {**body["metadata"], "resourceVersion": current["metadata"]["resourceVersion"]}}
    adm.replace_mutating_webhook_configuration(name, body, _preload_content=False).read()
    return "replaced"
