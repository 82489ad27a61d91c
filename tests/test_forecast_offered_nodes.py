"""The live rule "a pod goes only to the nodes kube-scheduler offered" closes the other nodes of
the state being decided. A start-time forecast runs a copy of the policy that shares the live
placer on a twin of the state, from the ETA thread: it must close the twin's nodes, never the
live state's (that raced with the live pass, and every observer of the live state saw cordons
that never happened)."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store
from dlsched.sim.eta import EtaEstimator


def test_a_forecast_closes_the_twin_not_the_live_state():
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"))
    for n in ("n1", "n2"):
        core.node_seen(NodeFacts(n, 4, "default", "", False))
    a = PodFacts("a", "default", "a", 4, created=1.0)
    b = PodFacts("b", "default", "b", 4, created=2.0)
    assert core.verdict(a, ["n1", "n2"])[0]          # a takes one node
    taken = core.state.node_ids[core.jobs["a"].placement[0][0]]
    other = "n2" if taken == "n1" else "n1"
    assert core.verdict(b, [taken])[0] == []          # b may go only where a runs: it waits
    live = core.state
    calls: list[str] = []
    real_cordon, real_uncordon = live.cordon, live.uncordon
    live.cordon = lambda *a, **k: (calls.append("cordon"), real_cordon(*a, **k))[1]
    live.uncordon = lambda *a, **k: (calls.append("uncordon"), real_uncordon(*a, **k))[1]
    with core.lock:
        result = EtaEstimator(core.policy).estimate(live, core.now())
    assert calls == []                                # the live state was not touched
    assert not any(live.node_cordoned)
    eta = result.by_id()
    # b starts in the forecast only on the node it was offered, once a ends there: not at once on
    # the other node, which is free (the twin's copy of the rule closed it)
    assert eta["b"] > core.now() and eta["b"] != float("inf")
    assert other not in core.offered.get("b", {other})
