"""KubeBridge against a fake API (JSON in, calls recorded): start-up reconciliation and the
re-list after a broken watch, which must also notice objects deleted meanwhile."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("kubernetes")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.kube import KubeBridge
from dlsched.service.store import Store


class Raw:
    """A urllib3 response as the bridge reads it: its body, and its connection handed back."""

    def __init__(self, obj: dict) -> None:
        self.data = json.dumps(obj).encode()
        self.released = False

    def release_conn(self) -> None:
        self.released = True


def node(name: str, gpus: int = 8) -> dict:
    cap = {"nvidia.com/gpu": str(gpus), "pods": "110"}
    return {"metadata": {"name": name}, "spec": {}, "status": {"capacity": cap, "allocatable": cap}}


def pod(uid: str, gpus: int, node_name: str = "", gpu_text: str = "", created: str = "2026-01-01T00:00:00Z") -> dict:
    lim = {"nvidia.com/gpu": str(gpus)}
    meta = {"uid": uid, "name": f"pod-{uid}", "namespace": "default", "creationTimestamp": created,
            "resourceVersion": "1", "annotations": {"dlsched.io/gpus": gpu_text} if gpu_text else {}}
    return {"metadata": meta, "spec": {"nodeName": node_name or None, "schedulerName": "default-scheduler",
                                       "containers": [{"name": "m", "resources": {"limits": lim, "requests": lim}}]},
            "status": {"phase": "Running" if node_name else "Pending"}}


class FakeApi:
    def __init__(self) -> None:
        self.nodes: list[dict] = []
        self.pods: list[dict] = []

    def list_node(self, _preload_content=False, **kw):
        return Raw({"metadata": {"resourceVersion": "10"}, "items": self.nodes})

    def list_pod_for_all_namespaces(self, _preload_content=False, **kw):
        return Raw({"metadata": {"resourceVersion": "20"}, "items": self.pods})


def test_reconcile_then_resync_after_a_broken_watch():
    api = FakeApi()
    api.nodes = [node("n1"), node("n2", 4)]
    # p1 bound before the restart (annotated), p2 pending, p3 pending and created later
    api.pods = [pod("p3", 2, created="2026-01-01T00:00:09Z"), pod("p1", 6, "n1", "2,3,4,5,6,7"), pod("p2", 4)]
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), clock=iter(range(10**9, 10**10)).__next__)
    bridge = KubeBridge(api, core)
    node_rv, pod_rv, holding = bridge.reconcile()
    assert (node_rv, pod_rv, holding) == ("10", "20", {"p1"})
    st = core.state
    assert st.node_holders[st.node_index["n1"]] == {core.jobs["p1"]: 0b11111100}
    assert [core.pods[j.job_id].name for j in sorted(st.vcs[0].queue, key=lambda j: (j.submit_time, j.enq_seq))] \
        == ["pod-p2", "pod-p3"]                           # queued in creation order
    core.run_pass()
    assert core.jobs["p2"].state.name == "ASSUMED" and core.jobs["p3"].state.name == "ASSUMED"
    # while the watch was down: p1 finished and was deleted, p2 deleted, n2 removed, p4 created
    api.pods = [pod("p3", 2), pod("p4", 8)]
    api.nodes = [node("n1")]
    assert bridge._resync("pods") == "20"
    assert set(core.jobs) == {"p3", "p4"}
    bridge._resync("nodes")
    assert "n2" not in st.node_index or st.node_cordoned[st.node_index["n2"]]
    kinds = [d["kind"] for d in core.store.decision_log(limit=100)]
    assert kinds.count("finish") == 1 and kinds.count("withdraw") >= 1
    st.check_invariants()
