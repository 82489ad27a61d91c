"""SchedulerCore is a facade over the adapter's parts: what a driver sets on it (the eviction
grace default, the clock, leader election's gate, serving) reaches the part that acts on it."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.kernel.stimuli import Evict
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store


def running_core() -> SchedulerCore:
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=lambda: 1000.0)
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    core.pod_seen(PodFacts("x", "default", "x", 2, node_name="n1", phase="Running", created=1.0))
    return core


def test_a_default_grace_set_on_the_facade_is_the_grace_of_an_eviction():
    core = running_core()
    core.default_grace = 7                     # what serve_cmd sets from --grace-seconds
    sent = []
    core.evictor = sent.append
    with core.lock:
        core.passes_part.carry_out([Evict(core.jobs["x"], "make room")], core.now())
    [intent] = sent
    assert intent.grace_s == 7 and core.default_grace == 7
    [row] = core.store.eviction_rows()
    assert int(row["grace_s"]) == 7


def test_the_clock_and_the_leader_gate_set_on_the_facade_are_the_ones_used():
    core = running_core()
    core.clock = lambda: 5000.0
    assert core.now() == 5000.0 and core.adapter.now() == 5000.0
    core.may_nominate = lambda: False          # a replica that does not lead
    core.pod_seen(PodFacts("a", "default", "a", 2, created=2.0))
    assert core.run_pass() == 0 and core.jobs["a"].state.name == "PENDING"
    core.may_nominate = lambda: True
    assert core.run_pass() == 1
    assert not core.serving
    core.serving = True
    assert core.adapter.noms.serving
