"""Queues from a ConfigMap on a real control plane (kube-apiserver v1.20 from ../shared/k8s): the
service reads ``queues.toml`` at start, applies a change, keeps the last good configuration when
the content turns invalid and reports it as a Warning event on the ConfigMap."""

from __future__ import annotations

import pytest
from support.polling import poll

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

GOOD = '[[queues]]\nname = "research"\nborrow_limit = 8\nnamespaces = ["team-a"]\n'


def _wait(fn, timeout: float = 60.0, step: float = 0.3):
    return poll(fn, timeout, step)


def test_queue_configmap_read_at_start_and_on_change(shared, tmp_path):
    from support.control_plane import add_gpu_node, extender_control_plane
    from support.service_proc import ServiceProcess

    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-0", 8)
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dlsched-queues"},
              "data": {"queues.toml": GOOD}}
        status, body = cp.request("POST", "/api/v1/namespaces/default/configmaps", cm)
        assert status == 201, body
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp_path}/q.db", "fifo", tmp_path / "q.log",
                             extra=("--queues-configmap", "default/dlsched-queues")).start()
        try:
            rep = _wait(lambda: (r := svc.get("/api/v1/queues"))["source"]["resource_version"] and r)
            assert rep["namespace_to_vc"] == {"team-a": "research"} and rep["error"] is None
            assert rep["configured_without_nodes"] == ["research"]   # no node of VC research yet
            # invalid content: the last good configuration stays, the error and a Warning event say why
            cm["data"]["queues.toml"] = GOOD.replace("borrow_limit = 8", "borrow_limit = -1")
            status, body = cp.request("PUT", "/api/v1/namespaces/default/configmaps/dlsched-queues", cm)
            assert status == 200, body
            rep = _wait(lambda: (r := svc.get("/api/v1/queues"))["error"] and r, timeout=40)
            assert "queues[1].borrow_limit" in rep["error"] and rep["namespace_to_vc"] == {"team-a": "research"}
            assert rep["counts"]["invalid"] == 1 and rep["counts"]["events"] == 1

            def event():
                _, events = cp.request("GET", "/api/v1/namespaces/default/events")
                return [e for e in events["items"] if e.get("reason") == "InvalidQueues"]
            (ev,) = _wait(event)
            assert ev["involvedObject"]["name"] == "dlsched-queues" and ev["type"] == "Warning"
            assert "queues[1].borrow_limit" in ev["message"]
            # fixed: applied
            cm["data"]["queues.toml"] = GOOD.replace('"team-a"', '"team-b"')
            cp.request("PUT", "/api/v1/namespaces/default/configmaps/dlsched-queues", cm)
            rep = _wait(lambda: (r := svc.get("/api/v1/queues"))["namespace_to_vc"] == {"team-b": "research"} and r,
                        timeout=40)
            assert rep["error"] is None and rep["counts"]["loaded"] == 2
        finally:
            svc.stop()
            cp.request("DELETE", "/api/v1/namespaces/default/configmaps/dlsched-queues")
