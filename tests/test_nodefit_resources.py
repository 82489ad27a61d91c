"""Requests against allocatable minus the pods already bound: every resource, with numbers."""

import pytest
from nodefit_builders import node, pod

from dlsched.service.nodefit import NodeTable, feasible, group_by_node
from dlsched.service.nodefit.resources import pod_requests

N = node("n1", cpu="4", memory="8Gi", gpus="8", pods="10", extra={"ephemeral-storage": "100Gi"})


@pytest.mark.parametrize(("requests", "bound", "why"), [
    ({"cpu": "4"}, [], []),
    ({"cpu": "4001m"}, [], ["Insufficient cpu"]),
    ({"cpu": "2"}, [{"cpu": "2"}], []),
    ({"cpu": "2"}, [{"cpu": "2001m"}], ["Insufficient cpu"]),
    ({"cpu": "0.5"}, [{"cpu": "3.5"}], []),
    ({"memory": "8Gi"}, [], []),
    ({"memory": "8589934593"}, [], ["Insufficient memory"]),            # 8Gi + 1 byte
    ({"memory": "4Gi"}, [{"memory": "4096Mi"}], []),
    ({"memory": "4Gi"}, [{"memory": "4097Mi"}], ["Insufficient memory"]),
    ({"ephemeral-storage": "100Gi"}, [], []),
    ({"ephemeral-storage": "101Gi"}, [], ["Insufficient ephemeral-storage"]),
    ({"nvidia.com/gpu": "8"}, [], []),
    ({"nvidia.com/gpu": "4"}, [{"nvidia.com/gpu": "5"}], ["Insufficient nvidia.com/gpu"]),
    ({"example.com/fpga": "1"}, [], ["Insufficient example.com/fpga"]),        # absent on the node: 0
    ({"hugepages-2Mi": "2Mi"}, [], ["Insufficient hugepages-2Mi"]),
    ({"cpu": "5", "memory": "9Gi", "nvidia.com/gpu": "9"}, [],
     ["Insufficient cpu", "Insufficient memory", "Insufficient nvidia.com/gpu"]),
    ({}, [{"cpu": "3"}] * 9, []),                                              # the 10th pod fits
    ({}, [{"cpu": "0"}] * 10, ["Too many pods"]),
    ({"cpu": "1"}, [{"cpu": "1"}] * 10, ["Too many pods", "Insufficient cpu"]),
])
def test_requests_against_allocatable(requests: dict, bound: list, why: list) -> None:
    bound_pods = [pod(f"b{i}", requests=r, node_name="n1", phase="Running") for i, r in enumerate(bound)]
    r = feasible(pod("p", requests=requests), [N], {"n1": bound_pods})
    assert r.reasons.get("n1", []) == why
    assert r.nodes == ([] if why else ["n1"])


def test_a_pod_that_requests_nothing_is_not_refused_by_an_overcommitted_node() -> None:
    over = [pod("b", requests={"cpu": "5"}, node_name="n1", phase="Running")]
    assert feasible(pod("p"), [N], {"n1": over}).nodes == ["n1"]
    # ... but one that requests anything is: kube-scheduler compares every core resource then
    assert feasible(pod("p", requests={"nvidia.com/gpu": "1"}), [N], {"n1": over}).reasons["n1"] == ["Insufficient cpu"]


def test_terminated_pods_free_their_share_and_any_scheduler_counts() -> None:
    done = [pod("s", requests={"nvidia.com/gpu": "8"}, node_name="n1", phase="Succeeded"),
            pod("f", requests={"nvidia.com/gpu": "8"}, node_name="n1", phase="Failed")]
    assert feasible(pod("p", requests={"nvidia.com/gpu": "8"}), [N], {"n1": done}).nodes == ["n1"]
    other = pod("o", requests={"nvidia.com/gpu": "1"}, node_name="n1", phase="Pending")
    other["spec"]["schedulerName"] = "default-scheduler"
    r = feasible(pod("p", requests={"nvidia.com/gpu": "8"}), [N], {"n1": [other]})
    assert r.reasons["n1"] == ["Insufficient nvidia.com/gpu"]


@pytest.mark.parametrize(("containers", "init", "overhead", "cpu_milli", "mem"), [
    (1, None, None, 500, 1 << 30),
    (3, None, None, 1500, 3 << 30),
    (1, [{"cpu": "2"}], None, 2000, 1 << 30),                       # init max wins for cpu only
    (2, [{"cpu": "800m", "memory": "3Gi"}, {"cpu": "1200m"}], None, 1200, 3 << 30),
    (2, [{"cpu": "900m"}], {"cpu": "250m", "memory": "128Mi"}, 1250, (2 << 30) + (128 << 20)),
])
def test_pod_request_is_sum_then_init_max_then_overhead(containers: int, init: list | None, overhead: dict | None,
                                                        cpu_milli: int, mem: int) -> None:
    p = pod("p", requests={"cpu": "500m", "memory": "1Gi"}, containers=containers, init=init, overhead=overhead)
    assert pod_requests(p["spec"]) == {"cpu": cpu_milli, "memory": mem}


def test_each_container_rounds_up_to_a_millicore() -> None:
    p = pod("p", requests={"cpu": "0.0001"}, containers=3)
    assert pod_requests(p["spec"]) == {"cpu": 3}


def test_overhead_and_init_containers_decide_fit() -> None:
    n = node("n1", cpu="2", memory="1Gi", pods="10")
    fits = pod("p", requests={"cpu": "1"}, init=[{"cpu": "2"}])
    assert feasible(fits, [n], {}).nodes == ["n1"]
    too_big = pod("p", requests={"cpu": "1"}, init=[{"cpu": "2"}], overhead={"cpu": "1m"})
    assert feasible(too_big, [n], {}).reasons["n1"] == ["Insufficient cpu"]


def test_host_ports_conflict_by_ip_and_protocol() -> None:
    n = node("n1")
    web = [{"containerPort": 80, "hostPort": 8080, "protocol": "TCP"}]
    bound = [pod("b", ports=web, node_name="n1", phase="Running")]
    taken = "node(s) didn't have free ports for the requested pod ports"
    assert feasible(pod("p", ports=web), [n], {"n1": bound}).reasons["n1"] == [taken]
    udp = [{"containerPort": 80, "hostPort": 8080, "protocol": "UDP"}]
    assert feasible(pod("p", ports=udp), [n], {"n1": bound}).nodes == ["n1"]
    pinned = [pod("b", ports=[{"containerPort": 1, "hostPort": 9000, "hostIP": "10.0.0.1"}], node_name="n1")]
    other_ip = [{"containerPort": 1, "hostPort": 9000, "hostIP": "10.0.0.2"}]
    assert feasible(pod("p", ports=other_ip), [n], {"n1": pinned}).nodes == ["n1"]
    any_ip = [{"containerPort": 1, "hostPort": 9000}]
    assert feasible(pod("p", ports=any_ip), [n], {"n1": pinned}).reasons["n1"] == [taken]


def test_an_assumed_pod_is_counted_and_a_recheck_does_not_compete_with_itself() -> None:
    table = NodeTable([node("n1", gpus="8"), node("n2", gpus="8")], {})
    p = pod("p", requests={"nvidia.com/gpu": "6"})
    table.assume("n1", p)
    q = pod("q", requests={"nvidia.com/gpu": "6"})
    r = table.feasible(q)
    assert (r.nodes, r.reasons) == (["n2"], {"n1": ["Insufficient nvidia.com/gpu"]})
    assert table.feasible(p).nodes == ["n1", "n2"]


def test_table_reuse_gives_the_same_answers_as_feasible() -> None:
    nodes = [node(f"n{i}", gpus=str(i)) for i in range(5)]
    bound = {"n3": [pod("b", requests={"nvidia.com/gpu": "2"}, node_name="n3", phase="Running")]}
    table = NodeTable(nodes, bound)
    for g in range(6):
        p = pod("p", requests={"nvidia.com/gpu": str(g)})
        assert table.feasible(p) == feasible(p, nodes, bound)


def test_group_by_node_keeps_bound_pods_by_name_and_skips_the_rest() -> None:
    a = pod("a", node_name="n1", phase="Running")
    b = pod("b", node_name="n1", phase="Succeeded")
    c = pod("c", node_name="n2")
    assert group_by_node([a, pod("pending"), b, c, "junk", {"spec": None}]) == {"n1": [a, b], "n2": [c]}
    assert group_by_node("junk") == {}  # type: ignore[arg-type]
