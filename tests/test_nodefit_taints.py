"""Taints and tolerations, cordoned nodes, NotReady nodes: each rule with its kube-scheduler words."""

import pytest
from nodefit_builders import node, pod

from dlsched.service.nodefit import feasible

GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
TAINTED = "node(s) had taint {nvidia.com/gpu: present}, that the pod didn't tolerate"


def reasons(p: dict, n: dict) -> list[str]:
    r = feasible(p, [n], {})
    assert bool(r.nodes) is not bool(r.reasons)
    return r.reasons.get(n["metadata"]["name"], [])


@pytest.mark.parametrize(("toleration", "ok"), [
    (None, False),
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "value": "present"}, True),                          # operator "" is Equal
    ({"key": "nvidia.com/gpu", "operator": "Equal", "value": "absent"}, False),
    ({"key": "nvidia.com/gpu", "operator": "Exists"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}, False),
    ({"key": "other", "operator": "Exists"}, False),
    ({"operator": "Exists"}, True),                                                 # empty key + Exists: all
    ({"operator": "Exists", "effect": "NoSchedule"}, True),
    ({"key": "nvidia.com/gpu", "operator": "Exists", "tolerationSeconds": 5}, True),  # seconds: eviction only
    ({"key": "nvidia.com/gpu", "operator": "Like"}, False),
])
def test_tolerations_against_a_no_schedule_taint(toleration: dict | None, ok: bool) -> None:
    p = pod("p", tolerations=[toleration] if toleration else None)
    assert reasons(p, node("n1", taints=[GPU_TAINT])) == ([] if ok else [TAINTED])


@pytest.mark.parametrize(("effect", "filters"), [("NoSchedule", True), ("NoExecute", True),
                                                  ("PreferNoSchedule", False)])
def test_which_effects_filter(effect: str, filters: bool) -> None:
    n = node("n1", taints=[{"key": "dedicated", "value": "ml", "effect": effect}])
    assert reasons(pod("p"), n) == (["node(s) had taint {dedicated: ml}, that the pod didn't tolerate"]
                                    if filters else [])


def test_only_the_first_untolerated_taint_is_reported() -> None:
    n = node("n1", taints=[{"key": "a", "effect": "NoSchedule"}, {"key": "b", "value": "x", "effect": "NoExecute"}])
    assert reasons(pod("p"), n) == ["node(s) had taint {a: }, that the pod didn't tolerate"]
    p = pod("p", tolerations=[{"key": "a", "operator": "Exists"}])
    assert reasons(p, n) == ["node(s) had taint {b: x}, that the pod didn't tolerate"]


def test_cordoned_node_unless_the_pod_tolerates_unschedulable() -> None:
    n = node("n1", unschedulable=True)
    assert reasons(pod("p"), n) == ["node(s) were unschedulable"]
    tol = {"key": "node.kubernetes.io/unschedulable", "operator": "Exists", "effect": "NoSchedule"}
    assert reasons(pod("p", tolerations=[tol]), n) == []


@pytest.mark.parametrize(("ready", "why"), [
    ("True", []), (None, []),
    ("False", ["node(s) had taint {node.kubernetes.io/not-ready: }, that the pod didn't tolerate"]),
    ("Unknown", ["node(s) had taint {node.kubernetes.io/unreachable: }, that the pod didn't tolerate"]),
])
def test_not_ready_nodes_carry_their_condition_taints(ready: str | None, why: list) -> None:
    assert reasons(pod("p"), node("n1", ready=ready)) == why


def test_a_pod_tolerating_not_ready_may_go_to_a_not_ready_node() -> None:
    daemon = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    assert reasons(pod("p", tolerations=daemon), node("n1", ready="False")) == []
    # the default 300 s NoExecute toleration every pod gets does not cover the NoSchedule one
    default = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute",
                "tolerationSeconds": 300}]
    assert reasons(pod("p", tolerations=default), node("n1", ready="False")) != []


def test_an_existing_condition_taint_is_not_doubled() -> None:
    n = node("n1", ready="False", taints=[{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"}])
    tol = [{"key": "node.kubernetes.io/not-ready", "operator": "Exists"}]
    assert reasons(pod("p", tolerations=tol), n) == []
    assert len(feasible(pod("p"), [n], {}).reasons["n1"]) == 1


def test_malformed_tolerations_tolerate_nothing_and_say_so() -> None:
    p = pod("p", tolerations=["junk", {"key": 5, "operator": "Exists"}, {"key": "nvidia.com/gpu", "operator": "Exists"}])
    r = feasible(p, [node("n1", taints=[GPU_TAINT])], {})
    assert r.nodes == ["n1"]
    assert r.notes == ["spec.tolerations[0] is malformed: it tolerates nothing",
                       "spec.tolerations[1] is malformed: it tolerates nothing"]
