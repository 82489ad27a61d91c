"""EASY live, end to end on a real v1.20.2 control plane (etcd + kube-apiserver + kube-scheduler
from ../shared/k8s; no kubelet: the test marks bound pods Running and deletes evicted ones), with
the pods' time limits as estimates (``--param estimate=limit``): a large pod holds a reservation
(its ETA in ``GET /api/v1/queue``), a short pod backfills ahead of it, a long pod does not (its
reason names the reservation), and the large pod starts at its reservation -- when the running
pod reaches its own time limit and dlsched stops it."""

from __future__ import annotations

import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod  # noqa: E402
from support.service_proc import ServiceProcess  # noqa: E402

PODS = "/api/v1/namespaces/default/pods"
R1_LIMIT_S = 12


def wait_for(what: str, probe, timeout: float = 40.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def limited(name: str, gpus: int, limit: int) -> dict:
    return gpu_pod(name, gpus, "easy", {"dlsched.io/time-limit-seconds": str(limit), "dlsched.io/grace-seconds": "1"})


def test_easy_live_reserves_for_the_large_pod_backfills_the_short_one_and_holds_the_long_one(shared, tmp_path):
    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-0", 4)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp_path}/easy.db", "easy",
                             tmp_path / "easy.log",
                             extra=("--param", "estimate=limit", "--eta-interval", "0", "--queues-configmap", ""))
        svc.start()

        def create(body: dict) -> None:
            status, out = cp.request("POST", PODS, body)
            assert status == 201, out

        def node_of(name: str) -> str:
            status, pod = cp.request("GET", f"{PODS}/{name}")
            return pod["spec"].get("nodeName", "") if status == 200 else ""

        def run(name: str) -> None:
            status, out = cp.request("PATCH", f"{PODS}/{name}/status", {"status": {"phase": "Running"}},
                                     content_type="application/merge-patch+json")
            assert status == 200, out

        def nudge() -> None:
            cp.request("PATCH", "/api/v1/nodes/gpu-0", {"metadata": {"labels": {"nudge": str(time.monotonic_ns())}}},
                       content_type="application/strategic-merge-patch+json")

        try:
            create(limited("r1", 2, R1_LIMIT_S))
            wait_for("r1 bound", lambda: node_of("r1"))
            r1_bound = time.time()
            run("r1")
            create(limited("big", 4, 60))
            create(limited("long", 2, 600))
            rows = wait_for("big's reservation in the queue", lambda: {
                r["pod"]: r for r in svc.get("/api/v1/queue")} if any(
                r["pod"] == "default/big" and r["eta_source"] == "reservation" for r in svc.get("/api/v1/queue"))
                else None)
            reserved = rows["default/big"]["eta"]
            assert r1_bound - 2.0 <= reserved - R1_LIMIT_S <= r1_bound + 1.0, (reserved, r1_bound)
            assert "reserved for default/big from " in rows["default/long"]["reason"], rows["default/long"]
            create(limited("short", 2, 3))   # ends before the reservation: backfills now
            wait_for("short bound", lambda: node_of("short"))
            assert time.time() < reserved and not node_of("long") and not node_of("big")
            run("short")
            cp.request("DELETE", f"{PODS}/short?gracePeriodSeconds=0")   # the short job finished
            # r1 reaches its limit: dlsched evicts it (the test plays kubelet and deletes it)
            wait_for("r1's eviction at its limit", lambda: (
                p := cp.request("GET", f"{PODS}/r1")[1]) and p["metadata"].get("deletionTimestamp"), timeout=30.0)
            assert time.time() >= reserved - 1.0
            cp.request("DELETE", f"{PODS}/r1?gracePeriodSeconds=0")
            wait_for("big bound", lambda: node_of("big") or nudge(), timeout=30.0)
            big_bound = time.time()
            print(f"reserved {reserved - r1_bound:.2f} s after r1's bind; big bound {big_bound - reserved:+.2f} s "
                  f"from its reservation")
            assert big_bound - reserved < 10.0, big_bound - reserved
            assert not node_of("long")   # still behind the large pod (no GPU left)
            kinds = {(d["pod"], d["kind"]) for d in svc.decisions()}
            assert ("default/r1", "time_limit") in kinds
        finally:
            svc.stop()
