"""A time limit live, end to end on a real v1.20.2 control plane (etcd + kube-apiserver +
kube-scheduler from ../shared/k8s; no kubelet, so nothing else counts the pod's
``activeDeadlineSeconds``): dlsched evicts the pod at its limit through the Eviction API with its
grace period and a ``TimeLimitExceeded`` event, and once the pod is gone (the test plays kubelet)
the job ends as a time-limit stop: a ``time_limit`` entry in the decision log and in /metrics."""

from __future__ import annotations

import time
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod  # noqa: E402
from support.service_proc import ServiceProcess  # noqa: E402

PODS = "/api/v1/namespaces/default/pods"
LIMIT_S = 4


def wait_for(what: str, probe, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_pod_with_active_deadline_seconds_on_a_node_without_kubelet_is_evicted_by_dlsched_at_its_limit(
        shared, tmp_path):
    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-0", 4)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp_path}/limit.db", "fifo",
                             tmp_path / "limit.log", extra=("--eta-interval", "0", "--queues-configmap", ""))
        svc.start()
        try:
            body = gpu_pod("capped-0", 4, "limit", {"dlsched.io/grace-seconds": "2"})
            body["spec"]["activeDeadlineSeconds"] = LIMIT_S
            status, out = cp.request("POST", PODS, body)
            assert status == 201, out
            wait_for("capped-0 bound", lambda: (p := cp.request("GET", f"{PODS}/capped-0")[1]) and
                     p["spec"].get("nodeName"))
            bound_at = time.monotonic()
            # played kubelet: Running, but no status.startTime (no kubelet counts the deadline)
            status, out = cp.request("PATCH", f"{PODS}/capped-0/status", {"status": {"phase": "Running"}},
                                     content_type="application/merge-patch+json")
            assert status == 200, out
            pod = wait_for("capped-0's eviction at its limit", lambda: (
                p := cp.request("GET", f"{PODS}/capped-0")[1]) and p["metadata"].get("deletionTimestamp") and p)
            waited = time.monotonic() - bound_at
            assert LIMIT_S - 1.0 <= waited <= LIMIT_S + 5.0, waited
            assert pod["metadata"]["deletionGracePeriodSeconds"] == 2
            events = wait_for("the TimeLimitExceeded event", lambda: [
                e for e in cp.request("GET", "/api/v1/namespaces/default/events")[1]["items"]
                if e["involvedObject"]["name"] == "capped-0" and e["reason"] == "TimeLimitExceeded"])
            assert events[0]["message"] == "stopped by dlsched at its time limit (grace 2 s)"
            status, _ = cp.request("DELETE", f"{PODS}/capped-0?gracePeriodSeconds=0")   # the kubelet's part
            assert status == 200
            stops = wait_for("the time_limit decision", lambda: [
                d for d in svc.decisions() if d["kind"] == "time_limit" and d["pod"] == "default/capped-0"])
            assert f"time limit ({LIMIT_S:g} s of run time" in stops[0]["detail"]
            assert [d["kind"] for d in svc.decisions() if d["pod"] == "default/capped-0"].count("evict") == 1
            with urllib.request.urlopen(svc.url + "/metrics", timeout=10) as resp:
                text = resp.read().decode()
            assert 'dlsched_decisions_total{kind="time_limit"} 1.0' in text, text[-2000:]
            assert svc.get("/api/v1/state")["running"] == 0
        finally:
            svc.stop()
