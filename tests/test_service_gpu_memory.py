"""Per-node GPU memory in the live service (issue 33, point 1): Horus with 2 jobs per GPU on a VC
whose nodes differ in GPU memory (``dlsched.io/gpu-memory-mib``) never co-locates pods whose
predicted memory exceeds *that node's* GPU memory -- also when the label reaches the service
after the node already runs pods, as GPU feature discovery labels a node after it joined.

The reported case: ResNet-50 at batch 128 (16,445 MiB predicted) and at batch 32 (5,862 MiB) on
one GPU of a 20,480 MiB node (22,307 MiB), and batch 128 + batch 64 (9,389 MiB) on a 24,576 MiB
GPU (25,834 MiB)."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")

# (utilisation %, memory MiB) as the service's predictor gives them for ResNet-50 at 128 / 64 / 32
PREDS = {"r128": (98.4, 16_445.0), "r64": (95.0, 9_389.0), "r32": (90.3, 5_862.0)}


class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def make_core(nodes: list[NodeFacts], policy: str = "horus") -> tuple[SchedulerCore, LiveService]:
    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = PREDS[job.model_name]

    core = SchedulerCore(make_policy(policy, share=True), Store("sqlite://"), max_jobs_per_gpu=2,
                         clock=iter(range(1000, 10**6)).__next__, predict=predict)
    for node in nodes:
        core.node_seen(node)
    return core, LiveService(core, Bridge())


def place(core: SchedulerCore, service: LiveService, uid: str, model: str, names: list[str]) -> str:
    """filter then bind, as kube-scheduler does; the node, or '' when the pod waits."""
    p = PodFacts(uid, "default", uid, 1, created=float(len(core.jobs)), annotations={"dlsched.io/model": model})
    passed, _ = core.filter(p, names)
    if passed:
        assert service.bind("default", uid, uid, passed[0]) == ""
        return passed[0]
    return ""


def gpu_memory(core: SchedulerCore) -> dict[tuple[str, int], tuple[float, float]]:
    """(node, GPU) -> (the holders' predicted memory, the node's GPU memory), for GPUs with holders."""
    st = core.state
    return {(st.node_ids[n], g): (st.gpu_pred_mem(n, g), st.node_mem[n])
            for n in range(len(st.node_ids)) for g in range(st.node_gpus[n]) if st.gpu_holders(n, g)}


def node(name: str, mem: int = 0, gpu_type: str = "") -> NodeFacts:
    return NodeFacts(name, 1, "default", gpu_type, False, gpu_mem_mib=mem)


def test_labelled_nodes_of_different_memory_never_hold_more_than_their_own():
    """40 GiB first, then 20 and 24 GiB. Free GPUs go by Horus's cost, GMem_j / CP_mem per node:
    the largest first (a100, g24, g20). Then the 40 GiB GPU takes batch 128 + batch 128 (32,890
    MiB); the 20 GiB one holds batch 128 and nothing beside it (22,307 MiB would not fit), the 24
    GiB one batch 128 and only batch 32 beside it (25,834 MiB with batch 64 would not fit)."""
    names = ["a100", "g20", "g24"]
    core, service = make_core([node("a100", gpu_type="A100"), node("g20", 20_480), node("g24", 24_576)])
    assert [place(core, service, f"p{i}", "r128", names) for i in range(4)] == ["a100", "g24", "g20", "a100"]
    assert place(core, service, "q64", "r64", names) == ""      # 25,834 > 24,576 and 22,307+ > 20,480
    assert place(core, service, "q32", "r32", names) == "g24"   # 22,307 <= 24,576; not g20 (> 20,480)
    assert place(core, service, "q32b", "r32", names) == ""
    assert gpu_memory(core) == {("a100", 0): (32_890.0, 40_960.0), ("g20", 0): (16_445.0, 20_480.0),
                                ("g24", 0): (22_307.0, 24_576.0)}


def test_a_memory_label_that_arrives_while_the_node_runs_pods_is_applied_at_once():
    """The reported case. g20 joins without its label (the default V100, 32 GiB), takes a batch-128
    pod, then is labelled 20,480 MiB: a batch-32 pod must not join it (22,307 > 20,480). Before,
    the change waited for the node to be idle (and with no further node event, forever), so the
    pod joined on the old 32 GiB figure."""
    names = ["a100", "g20"]
    core, service = make_core([node("a100", gpu_type="A100"), node("g20")])
    assert place(core, service, "big1", "r128", names) == "a100"
    assert place(core, service, "big2", "r128", names) == "g20"
    core.node_seen(node("g20", 20_480))
    assert core.state.node_mem[core.state.node_index["g20"]] == 20_480
    assert core.counters["node GPU types or memory changed in place"] == 1
    assert core.counters["node changes deferred while busy"] == 0
    assert place(core, service, "small1", "r32", names) == "a100"   # 22,307 <= 40,960
    assert place(core, service, "small2", "r32", names) == ""       # a100 is at its cap; g20 too small
    used = gpu_memory(core)
    assert used == {("a100", 0): (22_307.0, 40_960.0), ("g20", 0): (16_445.0, 20_480.0)}
    assert all(mem <= cap for mem, cap in used.values())
    # the dashboard reports the node's new figure
    assert {n["name"]: n["gpu_mem_mib"] for n in core.snapshot()["nodes"]} == {"a100": 40_960, "g20": 20_480}


def test_a_larger_memory_label_on_a_busy_node_gives_room_at_once():
    """g24 is labelled 24,576 MiB, holds batch 128, and batch 64 waits (25,834 > 24,576). Its label
    is corrected to 32,768 MiB: the waiting pod joins it in the next pass (a node change is a room
    gain, so Horus's carried failure does not hold it back)."""
    names = ["g24"]
    core, service = make_core([node("g24", 24_576)])
    assert place(core, service, "big", "r128", names) == "g24"
    assert place(core, service, "mid", "r64", names) == ""
    core.node_seen(node("g24", 32_768))
    assert place(core, service, "mid", "r64", names) == "g24"
    assert gpu_memory(core) == {("g24", 0): (25_834.0, 32_768.0)}


def test_a_gpu_count_change_on_a_busy_node_still_waits_for_it_to_be_idle():
    """Only the type and memory change in place: a node that reports another GPU count while it
    runs pods keeps its old shape (its pods hold GPU indices of it) until it is idle."""
    core, service = make_core([node("g20", 20_480)])
    assert place(core, service, "big", "r128", ["g20"]) == "g20"
    core.node_seen(NodeFacts("g20", 2, "default", "", False, gpu_mem_mib=24_576))
    st = core.state
    idx = st.node_index["g20"]
    assert (st.node_gpus[idx], st.node_mem[idx]) == (1, 24_576)
    assert core.counters["node changes deferred while busy"] == 1


def test_a_pod_too_large_for_the_free_node_waits_for_the_large_one_and_says_why():
    """g20 is free, a100 holds two batch-128 pods (its cap): a 22,000 MiB pod does not take g20's
    free 20,480 MiB GPU (it would run out of memory) but waits; the placement's reason names its
    memory. Once a100 has room it goes there."""
    names = ["a100", "g20"]
    core, service = make_core([node("a100", gpu_type="A100"), node("g20", 20_480)])
    PREDS["r22"] = (50.0, 22_000.0)
    try:
        assert place(core, service, "big1", "r128", names) == "a100"
        assert place(core, service, "big2", "r128", names) == "g20"
        assert place(core, service, "big3", "r128", names) == "a100"
        service.core.pod_gone("big2")
        assert place(core, service, "huge", "r22", names) == ""
        job = core.jobs["huge"]
        fit = core.policy.placer.place(core.view, job.vc_state, job)
        assert not fit.fits and fit.reason.startswith("needs 22,000 MiB per GPU: no node whose GPUs have that much")
        service.core.pod_gone("big1")
        assert place(core, service, "huge", "r22", names) == "a100"   # 16,445 + 22,000 <= 40,960
    finally:
        del PREDS["r22"]
