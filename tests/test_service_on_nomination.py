"""``SchedulerCore.on_nomination``: the seam a driver (scheduler mode) binds from is told of every
nomination -- a pod on its own and each pod of a gang -- after its store write, with the node and
the GPU indices the store holds."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


def make_core() -> tuple[SchedulerCore, list[tuple[str, str, str, list[str]]]]:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"),
                         clock=iter(range(1000, 10**6)).__next__)
    for i in range(3):
        core.node_seen(NodeFacts(f"gpu-{i}", 8, "default", "", False))
    calls: list[tuple[str, str, str, list[str]]] = []

    def told(pod: PodFacts, node: str, gpus: str) -> None:
        # the store already holds the nomination when the seam is called
        states = sorted({r["state"] for r in core.store.assignment_rows() if r["pod_uid"] == pod.uid})
        calls.append((pod.key, node, gpus, states))
    core.on_nomination = told
    return core, calls


def test_a_single_pod_nomination_is_told_after_its_store_write():
    core, calls = make_core()
    core.pod_seen(PodFacts("a", "default", "a", 2, created=1.0))
    assert core.run_pass() == 1
    [(key, node, gpus, states)] = calls
    assert (key, states) == ("default/a", ["assumed"])
    assert node == core.state.node_ids[core.jobs["a"].placement[0][0]]
    assert gpus == ",".join(str(g) for g, _ in core.slots["a"]) and len(gpus.split(",")) == 2
    assert core.run_pass() == 0 and len(calls) == 1   # nothing new: nobody told again


def test_each_pod_of_a_gang_is_told_with_its_own_node_and_gpus():
    core, calls = make_core()
    labels = {"dlsched.io/job": "train", "dlsched.io/min-member": "2"}
    for i in range(2):
        core.pod_seen(PodFacts(f"g{i}", "default", f"train-{i}", 8, created=1.0 + i, labels=labels))
    core.run_pass()
    assert sorted(c[0] for c in calls) == ["default/train-0", "default/train-1"]
    assert len({c[1] for c in calls}) == 2                       # 2 x 8 GPUs: two nodes
    assert all(c[2] == "0,1,2,3,4,5,6,7" and c[3] == ["assumed"] for c in calls)


def test_without_a_listener_nominations_go_on_as_before():
    core, calls = make_core()
    core.on_nomination = None
    core.pod_seen(PodFacts("a", "default", "a", 1, created=1.0))
    assert core.run_pass() == 1 and calls == []
