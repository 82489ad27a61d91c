"""The offered-nodes rule without a cordon inside the pass: a pod kube-scheduler offered some
nodes only is placed on them with the others taken out of placement for that one question
(``ClusterState.as_if``), so no observer hears of a node change that never happened and the
books come back exactly -- with exclusive GPUs and with two jobs per GPU."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store


class NodeWatch:
    """A state observer that counts node events (cordons and uncordons announce one)."""

    def __init__(self) -> None:
        self.events: list[int] = []

    def node_changed(self, node: int, now: float) -> None:
        self.events.append(node)


@pytest.mark.parametrize("cap", [1, 2])
def test_a_pod_offered_one_node_goes_there_and_no_node_event_is_heard(cap):
    core = SchedulerCore(make_policy("fifo", "consolidate", share=cap > 1), Store("sqlite://"),
                         max_jobs_per_gpu=cap, clock=iter(range(1000, 10**6)).__next__)
    for name in ("n1", "n2", "n3"):
        core.node_seen(NodeFacts(name, 4, "default", "", False))
    busy = PodFacts("busy", "default", "busy", 2, created=1.0)
    assert core.verdict(busy, ["n1", "n2", "n3"])[0] == ["n1"]   # consolidate: the first node
    watch = NodeWatch()
    core.state.add_observer(watch)
    before = (list(core.state.node_slot), list(core.state.node_free), [vc.free for vc in core.state.vcs],
              [dict(enumerate(vc.buckets)) for vc in core.state.vcs], [vc.share_nodes for vc in core.state.vcs])
    passed, why = core.verdict(PodFacts("p", "default", "p", 2, created=2.0), ["n3"])
    assert passed == ["n3"] and "nominated n3" in why
    assert watch.events == []                                   # no cordon, no uncordon
    assert not any(core.state.node_cordoned)
    after_nomination = core.state.node_free[2]
    assert after_nomination == 2
    # every node open again, and the books as before but for p's 2 GPUs on n3
    core.end_bind("p", "n3", "refused")                         # its GPUs return
    now = (list(core.state.node_slot), list(core.state.node_free), [vc.free for vc in core.state.vcs],
           [dict(enumerate(vc.buckets)) for vc in core.state.vcs], [vc.share_nodes for vc in core.state.vcs])
    assert now == before
    core.state.check_invariants()
