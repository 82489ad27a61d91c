"""Borrowing and reclaim live on a real control plane (etcd + kube-apiserver + kube-scheduler v1.20
from ../shared/k8s; no kubelet, so the test marks bound pods Running and deletes an evicted pod
once its deletion timestamp is set).

Two VCs of one 4-GPU node each; the queue ConfigMap lets A borrow 4 GPUs and B lend 4. A's
second pod does not fit on A's node and is bound on B's; then B's pod arrives: A's borrowed pod
is evicted through the Eviction API with the service's grace period (``--grace-seconds``), with
a ``Preempted`` event saying why; while it checkpoints, ``GET /api/v1/queue`` gives B's waiting
pod an ETA; once it is gone B's pod is bound on B's node. The decision log has the reclaim."""

from __future__ import annotations

import pytest
from support.polling import poll

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

PODS = "/api/v1/namespaces/default/pods"
QUEUES = """
[[queues]]
name = "A"
borrow_limit = 4

[[queues]]
name = "B"
lend_limit = 4
"""
GRACE = 7


def test_a_borrowed_pod_is_reclaimed_with_its_grace_period_when_the_lender_needs_its_node(shared, tmp_path):
    from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod
    from support.service_proc import ServiceProcess

    def pod(name: str, vc: str) -> dict:
        body = gpu_pod(name, 4, "borrow")
        body["metadata"]["labels"]["dlsched.io/vc"] = vc
        return body

    def create(body: dict) -> None:
        status, out = cp.request("POST", PODS, body)
        assert status == 201, out

    def get(name: str) -> dict | None:
        status, obj = cp.request("GET", f"{PODS}/{name}")
        return obj if status == 200 else None

    def node_of(name: str) -> str | None:
        obj = get(name)
        return obj["spec"].get("nodeName") if obj else None

    def running(name: str) -> None:
        status, out = cp.request("PATCH", f"{PODS}/{name}/status", {"status": {"phase": "Running"}},
                                 content_type="application/merge-patch+json")
        assert status == 200, out

    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-a", 4, {"dlsched.io/vc": "A"})
        add_gpu_node(cp, "gpu-b", 4, {"dlsched.io/vc": "B"})
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dlsched-queues"},
              "data": {"queues.toml": QUEUES}}
        status, body = cp.request("POST", "/api/v1/namespaces/default/configmaps", cm)
        assert status == 201, body
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp_path}/b.db", "fifo", tmp_path / "b.log",
                             extra=("--queues-configmap", "default/dlsched-queues",
                                    "--grace-seconds", str(GRACE))).start()
        try:
            rep = svc.get("/api/v1/queues")   # read once at start, before the pods
            assert rep["borrowing"]["enforced"] and rep["borrowing"]["refused"] is None, rep
            create(pod("a-0", "A"))
            assert poll(lambda: node_of("a-0"), 30, 0.1) == "gpu-a"
            running("a-0")
            # A's second pod: no room on A's node; bound on B's idle node as a loan
            create(pod("a-1", "A"))
            assert poll(lambda: node_of("a-1"), 30, 0.1) == "gpu-b"
            running("a-1")
            rep = poll(lambda: (r := svc.get("/api/v1/queues"))["borrowing"]["loans"] and r, 10, 0.1)
            rows = {r["name"]: r for r in rep["queues"]}
            assert (rows["A"]["borrowed_gpus"], rows["B"]["lent_gpus"]) == (4, 4)
            [loan] = rep["borrowing"]["loans"]
            assert (loan["pod"], loan["queue"], loan["lender"], loan["node"]) == ("default/a-1", "A", "B", "gpu-b")
            # B's pod: A's borrowed pod is evicted with the grace period; B's waits meanwhile
            create(pod("b-0", "B"))
            evicted = poll(lambda: (p := get("a-1")) and p["metadata"].get("deletionTimestamp") and p, 30, 0.1)
            assert evicted["metadata"]["deletionGracePeriodSeconds"] == GRACE
            events = poll(lambda: [e for e in cp.request("GET", "/api/v1/namespaces/default/events")[1]["items"]
                                   if e["reason"] == "Preempted" and e["involvedObject"]["name"] == "a-1"], 30, 0.1)
            assert "reclaim for queue B" in events[0]["message"] and f"grace {GRACE} s" in events[0]["message"]
            assert node_of("b-0") is None and node_of("a-0") == "gpu-a"   # a-0 runs on A's own node: kept
            queue = poll(lambda: [q for q in svc.get("/api/v1/queue") if q["pod"] == "default/b-0"
                                  and q["eta"] is not None], 30, 0.2)
            assert queue[0]["vc"] == "B" and queue[0]["eta_in_s"] >= 0
            rep = svc.get("/api/v1/queues")
            assert rep["borrowing"]["reclaims_in_flight"] == [
                {"pod": "default/a-1", "queue": "A", "for_queue": "B", "gpus": 4}]
            # play kubelet: the checkpointed pod is gone; B's pod gets B's node
            status, _ = cp.request("DELETE", f"{PODS}/a-1?gracePeriodSeconds=0")
            assert status == 200
            assert poll(lambda: node_of("b-0"), 30, 0.1) == "gpu-b"
            decisions = poll(lambda: (d := svc.decisions()) and any(
                x["kind"] in ("bind", "confirm") and x["pod"] == "default/b-0" for x in d) and d, 30, 0.2)
            rep = svc.get("/api/v1/queues")
        finally:
            svc.stop()
            for name in ("a-0", "a-1", "b-0"):
                cp.request("DELETE", f"{PODS}/{name}?gracePeriodSeconds=0")
            cp.request("DELETE", "/api/v1/namespaces/default/configmaps/dlsched-queues")
    [evict] = [d for d in decisions if d["kind"] == "evict"]
    assert evict["detail"].startswith("evicted default/a-1 for default/b-0: reclaim for queue B") and \
        evict["detail"].endswith(f"(grace {GRACE} s)")
    rows = {r["name"]: r for r in rep["queues"]}
    assert (rows["A"]["borrowed_gpus"], rows["B"]["lent_gpus"], rows["B"]["reclaims"], rows["A"]["reclaimed"]) == \
        (0, 0, 1, 1)
    assert rep["borrowing"]["loans"] == [] and rep["borrowing"]["reclaims_in_flight"] == []
