"""Gangs placed as their pods (issue 33 point 2): a gang of n pods x k GPUs asks the placement
for n pod-sized pieces, in the simulator (``Job.gpus_per_pod``) and live (service/gangs.py); a
gang whose pods find no room waits with a reason that says why and one Warning event."""

from __future__ import annotations

import pytest
from test_service_gang import Bridge, Placements, bind_all, gang_pod

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store
from dlsched.sim import SimConfig, Simulator

SHAPES = [(2, 6), (3, 3), (2, 5), (4, 3)]


def core_of(nodes: int, policy: str = "fifo", placement: str | None = "consolidate") -> SchedulerCore:
    core = SchedulerCore(make_policy(policy, placement), Store("sqlite://"), clock=iter(range(1000, 10**6)).__next__)
    for i in range(nodes):
        core.node_seen(NodeFacts(f"gpu-{i}", 8, "default", "", False))
    return core


def names(n: int) -> list[str]:
    return [f"gpu-{i}" for i in range(n)]


@pytest.mark.parametrize("policy, placement", [("fifo", "consolidate"), ("fifo", "best-fit"), ("fifo", "first-fit"),
                                               ("fifo", "spread"), ("fifo", "best-fit:1,spread:0.5")])
@pytest.mark.parametrize("n, k", SHAPES, ids=[f"{n}x{k}" for n, k in SHAPES])
def test_a_gang_of_n_pods_of_k_gpus_on_8_gpu_nodes_binds_each_pod_on_one_node(n, k, policy, placement):
    core = core_of(6, policy, placement)
    bridge = Bridge()
    service = LiveService(core, bridge)
    pods = [gang_pod(i, k, group="g", size=n) for i in range(n)]
    for p in pods:
        core.verdict(p, names(6))
    nodes = {}
    for p in pods:
        passed, why = core.verdict(p, names(6))
        assert len(passed) == 1, why
        nodes[p.uid] = passed[0]
    assert bind_all(service, pods, nodes) == {p.name: "" for p in pods}
    assert len(bridge.binds) == n and all(len(gpus) == k for _, _, gpus in bridge.binds)
    held: dict[str, list[int]] = {}
    for _, node, gpus in bridge.binds:
        held.setdefault(node, []).extend(gpus)
    assert all(len(g) == len(set(g)) and max(g) < 8 for g in held.values())   # no GPU twice, none beyond 8
    assert core.state.n_running == 1 and core.state.busy_gpus == n * k
    assert core.gangs.counters["gang placements that do not split into pods"] == 0


def test_a_gang_whose_pods_find_no_room_waits_with_the_reason_and_one_warning():
    core = core_of(4)
    warned: list[tuple[str, str, str]] = []
    core.gangs.warn = lambda pod, reason, message: warned.append((pod.key, reason, message))
    for i in range(4):   # every node keeps 4 of its 8 GPUs: 16 free, but no node has 6
        one = PodFacts(f"s{i}", "default", f"s{i}", 4, created=float(i))
        assert core.verdict(one, [f"gpu-{i}"])[0] == [f"gpu-{i}"]   # kube-scheduler offered that node alone
    calls = []
    inner = core.policy.placer.place
    # placements on the live state (the ETA's forward runs place on copies of it)
    core.policy.placer.place = lambda view, vc, job: (view is core.view and calls.append(job.job_id)) \
        or inner(view, vc, job)
    pods = [gang_pod(i, 6, group="g", size=2) for i in range(2)]
    for _ in range(20):   # kube-scheduler asks again and again (its backoff)
        for p in pods:
            passed, why = core.verdict(p, names(4))
            assert passed == []
    want = ("gang default/g of 2 x 6 GPUs: needs 2 pods of 6 free GPUs on one node each; 0 node(s) of VC default "
            "have 6 free GPUs, room for 0 pod(s)")
    assert want in why
    gang_id = "gang:default/g#1"
    assert core.why_waiting(gang_id) == want
    [row] = [r for r in core.queue() if r["uid"] == gang_id]
    assert row["reason"] == want and row["gpus"] == 12
    assert warned == [("default/g-0", "GangUnschedulable", want)]         # once, not once per retry
    assert [d["kind"] for d in core.store.decision_log(1000)].count("gang_unschedulable") == 1
    assert len(calls) <= 1                           # the same impossible placement is not retried per call
    core.pod_gone("s0")
    core.pod_gone("s1")                              # two nodes wholly free: the gang binds
    got = sorted(core.verdict(p, names(4))[0][0] for p in pods)
    assert got == ["gpu-0", "gpu-1"] and gang_id not in core.waiting
    assert len(warned) == 1


def test_a_gang_whose_pods_cannot_fit_even_on_empty_nodes_is_parked_with_the_reason():
    core = core_of(3)
    pods = [gang_pod(i, 5, group="big", size=4) for i in range(4)]   # 20 GPUs of 24, but one 5-GPU pod per node
    for p in pods:
        passed, why = core.verdict(p, names(3))
    assert passed == [] and core.state.n_pending == 0
    want = ("gang default/big of 4 x 5 GPUs needs 4 pods of 5 GPUs on one node each; the nodes of VC default "
            "hold 3 such pods even when empty")
    assert want in why
    # said once, before any API server was connected: the Warning event goes when one is
    assert core.gangs.unsent == [(pods[0], "GangUnschedulable", want)]
    sent: list[tuple] = []
    core.gangs.connect_warnings(lambda *event: sent.append(event))
    for p in pods:
        core.verdict(p, names(3))
    assert sent == [(pods[0], "GangUnschedulable", want)] and core.gangs.unsent == []
    assert core.gangs.counters["gangs warned: no room for their pods"] == 1


def test_a_job_whose_gpus_are_not_whole_pods_is_refused():
    assert Job("g", "default", 12, 0.0, 1.0, gpus_per_pod=6).gpus_per_pod == 6
    assert Job("p", "default", 12, 0.0, 1.0).gpus_per_pod == 0          # no pod shape: one piece
    with pytest.raises(ValueError, match="not whole pods of gpus_per_pod=5"):
        Job("bad", "default", 12, 0.0, 1.0, gpus_per_pod=5)


# -- the simulator ---------------------------------------------------------------------------
@pytest.mark.parametrize("policy, placement", [("fifo", "consolidate"), ("fifo", "best-fit"), ("fifo", "first-fit"),
                                               ("fifo", "spread"), ("fifo", "best-fit:1,spread:0.5"),
                                               ("horus", None), ("srtf", None), ("las", None)])
def test_the_simulator_places_a_pod_shaped_job_as_its_pods(policy, placement):
    """Four 8-GPU nodes; a 2 x 6 job and a 3 x 3 job arrive on an empty cluster, each as its pods;
    the same GPUs without a pod shape keep today's placement (8 + 4 for the 12)."""
    cluster = ClusterSpec.from_vc_sizes({"default": 4})
    record = Placements(cluster)
    jobs = [Job("a", "default", 12, 0.0, 100.0, gpus_per_pod=6), Job("b", "default", 9, 0.0, 100.0, gpus_per_pod=3),
            Job("plain", "default", 12, 200.0, 100.0)]
    Simulator(cluster, make_policy(policy, placement), SimConfig(), observers=[record]).run(jobs)
    for job_id, k in (("a", 6), ("b", 3)):
        shares = [m.bit_count() for _, m in record.seen[job_id]]
        assert sum(shares) == jobs[0 if k == 6 else 1].gpus and all(s % k == 0 for s in shares), (job_id, shares)
    if placement in ("consolidate", "best-fit"):
        assert sorted(m.bit_count() for _, m in record.seen["plain"]) == [4, 8]   # no pod shape: as before


@pytest.mark.parametrize("sizes", [(6, 6), (3, 3, 3), (5, 5)])
def test_the_simulator_and_the_service_place_a_pod_shaped_gang_the_same_way(sizes):
    singles = [6, 3, 1]
    cluster = ClusterSpec.from_vc_sizes({"default": 5})
    record = Placements(cluster)
    jobs = [Job(f"s{i}", "default", g, float(i), 1e6) for i, g in enumerate(singles)]
    jobs.append(Job("gang", "default", sum(sizes), 10.0, 1e6, gpus_per_pod=sizes[0]))
    Simulator(cluster, make_policy("fifo", "consolidate"), SimConfig(), observers=[record]).run(jobs)
    core = core_of(0)
    for spec in cluster.nodes:
        core.node_seen(NodeFacts(spec.node_id, spec.gpus, "default", "", False))
    all_nodes = [n.node_id for n in cluster.nodes]
    for i, g in enumerate(singles):
        core.verdict(PodFacts(f"s{i}", "default", f"s{i}", g, created=float(i)), all_nodes)
    pods = [gang_pod(i, g, size=len(sizes), created=10.0) for i, g in enumerate(sizes)]
    for p in pods:
        core.verdict(p, all_nodes)
    gang_job = next(j for j in core.jobs.values() if j.job_id.startswith("gang:"))
    assert tuple((core.state.node_ids[n], m) for n, m in gang_job.placement) == record.seen["gang"]
    per_node: dict[str, int] = {}
    for p in pods:
        [node] = core.verdict(p, all_nodes)[0]
        assert sum(1 for _ in core.slots[p.uid]) == p.gpus
        per_node[node] = per_node.get(node, 0) | sum(1 << g for g, _ in core.slots[p.uid])
    assert per_node == dict(record.seen["gang"])


# -- a gang whose pods ask for different GPU counts ---------------------------------------------
def test_a_gang_of_pods_of_6_and_4_gpus_gets_pieces_of_its_pods_sizes():
    """No pod shape (the pods differ): consolidate's 8 + 2 for the 10 GPUs cuts into no 6 + 4;
    the gang gets a 6-GPU piece and a 4-GPU piece instead of a refused nomination per pass."""
    core = core_of(4)
    service = LiveService(core, Bridge())
    pods = [gang_pod(0, 6, group="mix", size=2), gang_pod(1, 4, group="mix", size=2)]
    for p in pods:
        core.verdict(p, names(4))
    nodes = {p.uid: core.verdict(p, names(4))[0][0] for p in pods}
    assert bind_all(service, pods, nodes) == {p.name: "" for p in pods}
    assert sorted(len(g) for _, _, g in service.bridge.binds) == [4, 6] and len(set(nodes.values())) == 2
    assert core.gangs.counters["gang placements that do not split into pods"] == 0


def test_a_gang_of_pods_of_different_sizes_without_room_waits_with_the_reason_and_one_warning():
    core = core_of(4)
    warned: list[str] = []
    core.gangs.warn = lambda pod, reason, message: warned.append(message)
    for i in range(4):   # 4 free GPUs on every node: no room for the 6-GPU pod
        core.verdict(PodFacts(f"s{i}", "default", f"s{i}", 4, created=float(i)), [f"gpu-{i}"])
    pods = [gang_pod(0, 6, group="mix", size=2), gang_pod(1, 4, group="mix", size=2)]
    for _ in range(10):
        for p in pods:
            passed, why = core.verdict(p, names(4))
            assert passed == []
    want = "gang default/mix of pods of 6+4 GPUs: a pod of 6 GPUs finds no node with 6 free GPUs beside the gang's other pods"
    assert want in why and core.why_waiting("gang:default/mix#1") == want
    assert warned == [want]
    assert core.gangs.counters["gang placements that do not split into pods"] == 0   # never nominated and refused
