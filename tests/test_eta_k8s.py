"""ETAs in the queue API on a real control plane (etcd + kube-apiserver + kube-scheduler v1.20 from
../shared/k8s): two 8-GPU pods fill two nodes, two more wait; ``GET /api/v1/queue`` gives each
waiting pod an estimated start from the forward simulation, and the service's ETA timer writes
it to each waiting pod as the ``dlsched.io/eta`` annotation (read back from the API server)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
from support.polling import poll

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

DEFAULT = 3600.0   # FIFO pods carry no duration prediction: every pod gets the default hour


def _wait(fn, timeout: float = 60.0, step: float = 0.2):
    return poll(fn, timeout, step)


def test_waiting_pods_get_etas_in_the_queue_api(shared, tmp_path):
    from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod
    from support.service_proc import ServiceProcess

    with extender_control_plane(shared) as (cp, port):
        for i in range(2):
            add_gpu_node(cp, f"gpu-{i}", 8)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp_path}/eta.db", "fifo",
                             tmp_path / "eta.log", extra=("--eta-interval", "0.5")).start()
        try:
            for i in range(2):
                status, body = cp.request("POST", "/api/v1/namespaces/default/pods", gpu_pod(f"run-{i}", 8, "eta"))
                assert status == 201, body

            def bound() -> bool:
                _, listing = cp.request("GET", "/api/v1/namespaces/default/pods?labelSelector=run%3Deta")
                return sum(1 for p in listing["items"] if p["spec"].get("nodeName")) == 2
            _wait(bound)
            for i in range(2):
                status, body = cp.request("POST", "/api/v1/namespaces/default/pods", gpu_pod(f"wait-{i}", 8, "eta"))
                assert status == 201, body

            def both_estimated() -> list[dict] | None:
                rows = svc.get("/api/v1/queue")
                return rows if len(rows) == 2 and all(q["eta"] is not None for q in rows) else None
            rows = _wait(both_estimated)
            assert sorted(q["pod"] for q in rows) == ["default/wait-0", "default/wait-1"]
            for q in rows:   # each waits for one running pod's (default) hour, minus the time it ran
                assert DEFAULT - 120 < q["eta_in_s"] <= DEFAULT, q

            def annotated() -> dict[str, str] | None:
                out = {}
                for i in range(2):
                    _, obj = cp.request("GET", f"/api/v1/namespaces/default/pods/wait-{i}")
                    text = (obj["metadata"].get("annotations") or {}).get("dlsched.io/eta")
                    if text is None:
                        return None
                    out[f"default/wait-{i}"] = text
                return out
            written = _wait(annotated)
            by_pod = {q["pod"]: q for q in svc.get("/api/v1/queue")}
            for key, text in written.items():
                m = re.fullmatch(r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ) in (\d+)s", text)
                assert m, text
                at = datetime.strptime(m.group(1), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
                assert abs(at - by_pod[key]["eta"]) <= 1.0, (text, by_pod[key])   # the queue API's estimate
                assert DEFAULT - 120 < int(m.group(2)) <= DEFAULT
            timer = svc.get("/api/v1/eta")["timer"]
            assert timer["annotations"]["written"] >= 2 and timer["annotations"]["failed"] == 0, timer
        finally:
            svc.stop()
            for name in ("run-0", "run-1", "wait-0", "wait-1"):
                cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
