"""The scheduler mode's Unschedulable reports in a drain (issue 34 "throughput"): a condition the
pod already carries is not written again, a pod's reports are queued one per pod and written at
a capped rate, a report whose pod got nodes meanwhile is dropped, and a watch event does not set
the pass trigger again while it is set. In process, on the fake API of test_scheduler_mode."""

from __future__ import annotations

import threading
import time

import pytest

pytest.importorskip("kubernetes")

from test_scheduler_mode import FakeApi, _service, _settle, node, pod  # noqa: E402

from dlsched.service.scheduler_mode import bridge as bridge_mod  # noqa: E402
from dlsched.service.scheduler_mode.reports import ReportQueue  # noqa: E402

AFFINITY = "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity."


def _carrying(uid: str, message: str, since: str = "2026-01-01T00:00:05Z") -> dict:
    p = pod(uid, 1, nodeSelector={"zone": "x"})
    p["status"]["conditions"] = [{"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
                                  "message": message, "lastTransitionTime": since, "lastProbeTime": None}]
    return p


def _wait(cond, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not cond() and time.monotonic() < deadline:
        time.sleep(0.02)


def test_a_pod_that_already_carries_its_condition_gets_no_patch_and_no_event_and_a_new_reason_does():
    """After a restart or a failover the pods still carry the last leader's condition: nothing is
    written for them; a pod whose reason changed gets the new one, its transition time kept."""
    api = FakeApi([node("a")], [_carrying("p", AFFINITY)])
    service, bridge = _service(api)
    threading.Thread(target=bridge._reporter, daemon=True).start()
    try:
        bridge.reconcile()
        service.core.run_pass()
        _settle(api, 1, timeout=0.5)
        assert api.writes == [] and bridge.counts["reports_unchanged"] == 1
        bridge._node_event("ADDED", node("b", unschedulable=True))   # the reason now differs
        bridge.refit("p")
        _settle(api, 2)
        (kind, _, cond), event = api.writes
        assert kind == "status" and cond["message"] == ("0/2 nodes are available: 1 node(s) didn't match Pod's "
                                                        "node affinity, 1 node(s) were unschedulable.")
        assert cond["lastTransitionTime"] == "2026-01-01T00:00:05Z"   # still False: as kube-scheduler keeps it
        assert event == ("event", "pod-p", "FailedScheduling", cond["message"])
    finally:
        service.stop()


def test_a_drains_reports_are_capped_in_rate_and_dropped_once_their_pods_get_nodes():
    """30 pods no node passes: two reports written at once (the burst), the third waits for the
    rate; a node comes meanwhile, and the 28 reports left are dropped, never written."""
    api = FakeApi([node("a")], [pod(f"p{i:02d}", 1, nodeSelector={"zone": "x"}) for i in range(30)])
    service, bridge = _service(api)
    bridge._reports = ReportQueue(rate=0.5, burst=2)
    try:
        bridge.reconcile()
        assert len(bridge._reports) == 30
        threading.Thread(target=bridge._reporter, daemon=True).start()
        _settle(api, 4)
        assert [w[:2] for w in api.writes] == [("status", "pod-p00"), ("event", "pod-p00"),
                                               ("status", "pod-p01"), ("event", "pod-p01")]
        bridge._node_event("ADDED", node("z", labels={"zone": "x"}))
        service.core.run_pass()
        _wait(lambda: bridge.counts["reports_dropped"] >= 28 and not len(bridge._reports))
        _settle(api, 12)
        assert bridge.counts["reports_dropped"] == 28 and len(bridge._reports) == 0
        assert sum(w[0] == "status" for w in api.writes) == 2 and sum(w[0] == "event" for w in api.writes) == 2
        assert sum(w[0] == "binding" for w in api.writes) == 8   # z's 8 GPUs; the rest wait for GPUs
        assert bridge.describe()["reports_queued"] == 0
    finally:
        service.stop()


def test_a_queued_report_is_replaced_by_the_pods_newer_one_in_its_place():
    q = ReportQueue()
    q.put("a", {}, "old")
    q.put("b", {}, "b's")
    q.put("a", {}, "new", waiting=True)
    assert (len(q), q.replaced) == (2, 1)
    assert q.get(0) == ("a", {}, "new", True) and q.get(0) == ("b", {}, "b's", False)
    assert q.get(0) is None


def test_the_report_rate_is_a_token_bucket():
    class Stop:
        def __init__(self) -> None:
            self.waits: list[float] = []

        def wait(self, t: float) -> bool:
            self.waits.append(round(t, 6))
            return False

    now = [0.0]
    q = ReportQueue(rate=4.0, burst=2, clock=lambda: now[0])
    stop = Stop()
    assert q.take_token(stop) and q.take_token(stop) and stop.waits == []   # the burst

    def later(t: float) -> bool:
        stop.waits.append(round(t, 6))
        now[0] += t
        return False
    stop.wait = later
    assert q.take_token(stop) and stop.waits == [0.25]   # one more after 1/rate s
    with pytest.raises(ValueError):
        ReportQueue(rate=0)


def test_a_watch_event_does_not_set_the_pass_trigger_again_while_it_is_set(monkeypatch):
    class Counting(threading.Event):
        sets = 0

        def set(self) -> None:
            Counting.sets += 1
            super().set()

    handlers = []
    monkeypatch.setattr(bridge_mod, "watch_kind", lambda lister, rv, handle, *rest: handlers.append(handle))
    api = FakeApi([node("a")], [])
    service, bridge = _service(api, workers=False)
    try:
        bridge._pass_wanted = Counting()
        bridge._watch("pods", "1")
        for i in range(5):
            handlers[0]("ADDED", pod(f"q{i}", 1, scheduler="default-scheduler"))
        assert Counting.sets == 1 and bridge._pass_wanted.is_set()
    finally:
        service.stop()


def test_a_pending_pods_own_report_coming_back_through_the_watch_is_no_news_to_the_core(monkeypatch):
    """The watch shows each report's PATCH as a MODIFIED pod: its copy is kept (the next patch's
    place), but the core is not told and no pass is asked for; any other change is news."""
    handlers = []
    monkeypatch.setattr(bridge_mod, "watch_kind", lambda lister, rv, handle, *rest: handlers.append(handle))
    api = FakeApi([node("a")], [pod("p", 1, nodeSelector={"zone": "x"})])
    service, bridge = _service(api, workers=False)
    try:
        bridge.reconcile()
        seen = []
        monkeypatch.setattr(service.core, "pod_seen", lambda facts: seen.append(facts.uid))
        bridge._watch("pods", "1")
        echo = _carrying("p", AFFINITY)
        echo["metadata"]["resourceVersion"] = "2"
        handlers[0]("MODIFIED", echo)
        assert seen == [] and not bridge._pass_wanted.is_set() and bridge.pending["p"] is echo
        assert bridge.counts["status_echoes"] == 1
        labelled = _carrying("p", AFFINITY)
        labelled["metadata"]["labels"] = {"team": "a"}
        handlers[0]("MODIFIED", labelled)
        assert seen == ["p"] and bridge._pass_wanted.is_set()
    finally:
        service.stop()
