"""The drain benchmarks' like-for-like baseline: kube-scheduler alone's GPU-less pods request CPU
so that exactly as many fit a new node as dlsched's one-GPU pods; the room line says when a
drain's last pod had room. Hand-checked numbers, no control plane."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from support.benchmarks import k8s_phases


@pytest.mark.parametrize("per_node", [1, 2, 3, 7, 8, 16, 64, 110])
def test_the_cpu_request_packs_exactly_as_many_pods_as_gpus(per_node: int) -> None:
    k8s = k8s_phases()
    from support.control_plane import NODE_CPUS

    millis = k8s.packed_cpu_millis(per_node)
    assert per_node * millis <= NODE_CPUS * 1000 < (per_node + 1) * millis
    assert k8s.packed_cpu_millis(8) == 8000


def test_a_packing_no_cpu_request_can_give_is_refused() -> None:
    k8s = k8s_phases()
    with pytest.raises(ValueError, match="no CPU request packs exactly 111 pods"):
        k8s.packed_cpu_millis(111)   # more than the node's pod count
    with pytest.raises(ValueError):
        k8s.packed_cpu_millis(64001)


def test_the_pod_body_requests_cpu_beside_or_without_gpus() -> None:
    k8s = k8s_phases()
    res = k8s.pod_body("p", 0, cpu_millis=8000)["spec"]["containers"][0]["resources"]
    assert res == {"limits": {"cpu": "8000m"}, "requests": {"cpu": "8000m"}}
    res = k8s.pod_body("p", 1)["spec"]["containers"][0]["resources"]
    assert res == {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    assert k8s.pod_body("p", 0)["spec"]["containers"][0]["resources"] == {}


def _phase(k8s, adds: list[float], last: float, rate: float = 100.0):
    return k8s.Phase("drain", [1.0] * 500, 0, 1.0, rate, {}, 0, adds=adds, last=last)


def test_the_room_line_names_the_add_that_gave_the_last_pod_room() -> None:
    k8s = k8s_phases()
    adds = [0.1 * (i + 1) for i in range(100)]          # the 63rd add ends at 6.3 s
    assert k8s.nodes_needed(500, 8) == 63 and k8s.nodes_needed(500, 110) == 5
    line = k8s.drain_room_line("x", _phase(k8s, adds, 7.25), 500, 8)
    assert line == ("  x: room for all 500 pods (8 a node) once 63 of 100 nodes were added, "
                    "6.30 s after the first add began; last bind at 7.25 s (0.95 s after room)")
    line = k8s.drain_room_line("x", _phase(k8s, adds, 2.0), 500, 110)
    assert "once 5 of 100 nodes were added, 0.50 s after" in line
    short = k8s.drain_room_line("x", _phase(k8s, adds[:10], 2.0), 500, 8)
    assert short == "  x: room for 500 pods needs 63 new nodes (8 a node); 10 added"


def test_the_like_for_like_ratio_is_over_the_packed_phase() -> None:
    k8s = k8s_phases()
    adds = [0.1 * (i + 1) for i in range(100)]
    args = SimpleNamespace(gpus_per_node=8, pods=500)
    base, packed, mine = _phase(k8s, adds, 1.0, 250.0), _phase(k8s, adds, 7.0, 80.0), _phase(k8s, adds, 7.5, 60.0)
    lines = k8s.packed_lines(args, base, mine, packed)
    assert lines[0] == "  pods/s dlsched / kube-scheduler alone at 8 pods a node (like for like): 0.75x"
    assert "(110 a node) once 5 of 100" in lines[1]
    assert "(8 a node) once 63 of 100" in lines[2] and lines[3].startswith("  dlsched: room for all 500")
    nan = k8s.packed_lines(args, base, mine, _phase(k8s, adds, 7.0, 0.0))[0]
    assert math.isnan(float(nan.split(": ")[1].rstrip("x")))


def test_a_drain_whose_packing_no_cpu_request_can_give_is_refused_before_it_starts() -> None:
    k8s = k8s_phases()
    args = SimpleNamespace(pods=100, nodes=1, gpus_per_node=111, scheduler_qps=1000, modes="burst,drain")
    assert k8s.check_args(args) == ("error: --gpus-per-node 111: no CPU request packs exactly 111 pods on a "
                                    "64-CPU node (the drain's like-for-like baseline)")
    assert k8s.check_args(SimpleNamespace(**{**vars(args), "modes": "burst"})) == ""
    assert k8s.check_args(SimpleNamespace(**{**vars(args), "gpus_per_node": 8, "pods": 8})) == ""
