"""Reservations live, on the core with a fake clock: under ``easy`` (and ``conservative``) a
waiting pod's reservation is its ETA in ``GET /api/v1/queue`` (and the ``dlsched.io/eta``
annotation's), and a pod whose GPUs are free but that the reservation holds back says
``reserved for NS/POD from T``; a short pod backfills ahead of the head, a long one does not.
Estimates are the pods' time limits (``estimate=limit``, the ``dlsched.io/time-limit-seconds``
annotation or ``activeDeadlineSeconds``)."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.eta import pending_etas
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")

T0 = 1_800_000_000.0   # 2027-01-15T08:00:00Z
AT_T1 = "2027-01-15T08:01:40Z"   # T0 + 100


class Clock:
    def __init__(self, t: float) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def pod(uid: str, gpus: int, limit: float | None = None, deadline: int | None = None, created: float = 1.0,
        node: str = "", phase: str = "Pending") -> PodFacts:
    ann = {} if limit is None else {"dlsched.io/time-limit-seconds": str(limit)}
    return PodFacts(uid, "ml", uid, gpus, node, phase, False, created, annotations=ann, deadline_s=deadline)


def setup(policy: str):
    clock = Clock(T0)
    core = SchedulerCore(make_policy(policy, estimate="limit"), Store("sqlite://"), clock=clock)
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    core.pod_seen(pod("r1", 2, limit=100, created=1.0))
    core.run_pass()
    core.pod_seen(pod("r1", 2, limit=100, created=1.0, node="n", phase="Running"))   # runs T0 .. T0+100
    core.pod_seen(pod("big", 4, deadline=600, created=2.0))    # the head: reserved at T0+100
    core.pod_seen(pod("long", 2, limit=500, created=3.0))      # fits now, would end after T0+100
    core.run_pass()
    return core, clock


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_the_reservation_is_the_eta_and_the_long_pod_is_held_back_for_it(policy):
    core, clock = setup(policy)
    assert core.jobs["big"].state.name == core.jobs["long"].state.name == "PENDING"
    rows = {r["uid"]: r for r in core.queue()}
    assert rows["big"]["eta"] == T0 + 100 and rows["big"]["eta_in_s"] == 100.0
    assert rows["big"]["eta_source"] == "reservation"
    assert rows["long"]["reason"] == (f"held back by dlsched ({policy}): its 2 GPUs are free (2 in VC default), "
                                      f"but reserved for ml/big from {AT_T1}")
    assert "reserved for ml/big from " + AT_T1 in core.why_waiting("long")
    assert f"reserved to start at {AT_T1} (in 2 min, {policy})" in core.why_waiting("big")
    # the dashboard's queue shows the same (it reads the queue's rows)
    from types import SimpleNamespace

    from dlsched.service.dashboard import dashboard_data

    board = {q["uid"]: q for q in dashboard_data(SimpleNamespace(core=core))["queue"]}
    assert board["big"]["eta_in_s"] == 100.0 and "reserved for ml/big" in board["long"]["reason"]
    # the ETA annotation writes the reservation too
    assert dict((p.uid, t) for p, t in pending_etas(core, {"big": 5.0, "long": 7.0}))["big"] == T0 + 100


def test_easy_a_short_pod_backfills_ahead_of_the_head_and_the_head_starts_at_its_reservation():
    core, clock = setup("easy")
    clock.t = T0 + 10
    core.pod_seen(pod("short", 2, limit=60, created=4.0))   # ends by T0+70 <= T0+100: backfills
    core.run_pass()
    assert core.jobs["short"].state.name == "ASSUMED" and core.jobs["long"].state.name == "PENDING"
    core.pod_seen(pod("short", 2, limit=60, created=4.0, node="n", phase="Running"))
    assert core.adapter.policy.book.backfilled == 1
    rows = {r["uid"]: r for r in core.queue()}
    assert rows["long"]["reason"] == "" and rows["big"]["eta"] == T0 + 100   # no GPU free now: not "held"
    clock.t = T0 + 70
    core.pod_seen(pod("short", 2, limit=60, created=4.0, node="n", phase="Succeeded"))
    core.run_pass()
    assert core.jobs["long"].state.name == "PENDING"   # still held: it would push the head back
    assert "reserved for ml/big" in core.why_waiting("long")
    clock.t = T0 + 100
    core.pod_seen(pod("r1", 2, limit=100, created=1.0, node="n", phase="Succeeded"))
    core.run_pass()
    assert core.jobs["big"].state.name == "ASSUMED"   # at its reservation
    book = core.adapter.policy.book
    assert book.records[core.jobs["big"]][0] == T0 + 100 and book.records[core.jobs["big"]][3] == T0 + 100
    assert book.reserved(core.jobs["big"]) is None   # started: no reservation shown any more


def test_a_policy_without_reservations_shows_the_forecast():
    clock = Clock(T0)
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock)
    core.node_seen(NodeFacts("n", 4, "default", "", False))
    core.pod_seen(pod("a", 4, limit=100))
    core.pod_seen(pod("b", 4, limit=100, created=2.0))
    core.run_pass()
    rows = {r["uid"]: r for r in core.queue()}
    assert rows["b"]["eta_source"] == "forecast" and "held back" not in rows["b"]["reason"]


@pytest.mark.parametrize("policy", ["easy", "conservative"])
def test_on_overrun_stop_evicts_an_overrunning_backfilled_pod_at_the_reservation(policy):
    """Live, the same policy object: c (2 GPUs, predicted 5 s) backfills ahead of the head b (4
    GPUs, reserved at a's predicted end, T0+10); at T0+10 the policy's wake-up finds c still
    running and b due, and c's stop is an eviction (intent in the store, the pod's grace period)
    with the reason naming the reservation it overran."""
    clock = Clock(T0)
    core = SchedulerCore(make_policy(policy, on_overrun="stop"), Store("sqlite://"), clock=clock)
    sent: list = []
    core.evictor = sent.append
    core.node_seen(NodeFacts("n", 4, "default", "", False))

    def seen(uid: str, gpus: int, pred: float, created: float, **kw) -> None:
        core.pod_seen(pod(uid, gpus, created=created, **kw))
        core.jobs[uid].pred_duration = pred   # what the estimator says, set by hand

    seen("a", 2, 10.0, 1.0)
    core.run_pass()
    core.pod_seen(pod("a", 2, created=1.0, node="n", phase="Running"))
    seen("b", 4, 10.0, 2.0)
    seen("c", 2, 5.0, 3.0)
    core.run_pass()
    assert core.jobs["c"].state.name == "ASSUMED" and core.jobs["b"].state.name == "PENDING"
    core.pod_seen(pod("c", 2, created=3.0, node="n", phase="Running"))
    assert core.next_timer() == T0 + 10
    clock.t = T0 + 10
    core.fire_timers()
    rows = core.store.eviction_rows()
    assert [r["pod"] for r in rows] == ["ml/c"]
    assert f"overran its estimate into the reservation of b (on_overrun=stop, {policy})" in rows[0]["reason"]
    assert len(sent) == 1 and core.adapter.policy.book.stopped == 1
