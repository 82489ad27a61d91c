"""The service app on a real socket, in-process (uvicorn in a thread), with a fake API-server
bridge: what Prometheus, the node agent and a browser talk to in the operate tests."""

from __future__ import annotations

import json
import socket
import threading
import time
import urllib.request


class FakeBridge:
    """Records binds; every bind succeeds."""

    def __init__(self) -> None:
        self.binds: list[tuple] = []

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        self.binds.append((namespace, name, uid, node, tuple(gpus or ())))
        return ""

    def stop(self) -> None:
        pass


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pod_json(uid: str, gpus: int, model: str = "", created: str = "2026-01-01T00:00:00Z") -> dict:
    lim = {"nvidia.com/gpu": str(gpus)}
    meta = {"uid": uid, "name": uid, "namespace": "default", "creationTimestamp": created,
            "annotations": {"dlsched.io/model": model} if model else {}}
    return {"metadata": meta, "spec": {"schedulerName": "default-scheduler",
                                       "containers": [{"name": "m", "resources": {"limits": lim, "requests": lim}}]},
            "status": {"phase": "Pending"}}


class LiveApp:
    """``build_app(service)`` served by uvicorn on 127.0.0.1:PORT in a daemon thread."""

    def __init__(self, app, port: int | None = None) -> None:
        import uvicorn

        self.port = port or free_port()
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                                    access_log=False, lifespan="off"))
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def __enter__(self) -> LiveApp:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc) -> None:
        self.server.should_exit = True
        self.thread.join(10)

    def call(self, method: str, path: str, body: object | None = None, token: str = "") -> object:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if token:
            req.add_header("Authorization", f"Bearer {token}")
        with urllib.request.urlopen(req, timeout=10) as resp:
            raw = resp.read()
        return json.loads(raw) if raw and raw[:1] in b"[{" else raw.decode()

    def schedule(self, uid: str, gpus: int, nodes: list[str], model: str = "") -> str:
        """One pod through filter then bind (as kube-scheduler does); the node it went to, or ''."""
        out = self.call("POST", "/scheduler/filter", {"Pod": pod_json(uid, gpus, model), "NodeNames": nodes})
        passed = out["NodeNames"] or []
        if not passed:
            return ""
        res = self.call("POST", "/scheduler/bind", {"PodName": uid, "PodNamespace": "default", "PodUID": uid,
                                                    "Node": passed[0]})
        assert res == {"Error": ""}, res
        return passed[0]
