"""The ETA timer of the live service: refreshes off the request path, ``dlsched.io/eta`` pod
annotations written only when an estimate moved by more than the threshold (counted), the ETA
column of the dashboard, and ``GET /api/v1/eta``."""

from __future__ import annotations

import math
import time

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.dashboard import _when, render_body
from dlsched.service.eta import NEVER, EtaAnnotator, EtaRefresher, eta_text
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

T0 = 1_800_000_000.0   # 2027-01-15T08:00:00Z


class Clock:
    def __init__(self) -> None:
        self.t = T0

    def __call__(self) -> float:
        return self.t


class Bridge:
    """Binds succeed; ETA annotations are kept per pod name."""

    def __init__(self) -> None:
        self.etas: dict[str, list[str]] = {}

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def write_eta(self, pod, text: str) -> str:
        self.etas.setdefault(pod.name, []).append(text)
        return ""

    def stop(self) -> None:
        pass


def pod(uid: str, gpus: int) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, created=0.0)


def setup():
    clock = Clock()
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), clock=clock)
    core.node_seen(NodeFacts("n", 8, "default", "", False))
    bridge = Bridge()
    service = LiveService(core, bridge)
    passed, _ = core.filter(pod("run", 8), ["n"])
    assert passed == ["n"] and service.bind("default", "run", "run", "n") == ""
    core.jobs["run"].pred_duration = 600.0
    core.pod_seen(pod("wait", 8))
    core.jobs["wait"].pred_duration = 300.0
    core.run_pass()
    return clock, core, bridge, service


def test_eta_text_is_iso_time_and_seconds_from_now():
    assert eta_text(T0 + 600, T0) == "2027-01-15T08:10:00Z in 600s"
    assert eta_text(T0 - 5, T0) == "2027-01-15T07:59:55Z in 0s"
    assert eta_text(math.inf, T0) == NEVER


def test_annotation_written_once_then_only_when_it_moved_past_the_threshold():
    clock, core, bridge, service = setup()
    timer = EtaRefresher(core.eta, 1.0, EtaAnnotator(bridge.write_eta, threshold=60.0))
    assert timer.tick() is True
    # "run" started at T0 with 600 s predicted: "wait" starts when it ends
    assert bridge.etas == {"wait": ["2027-01-15T08:10:00Z in 600s"]}
    assert timer.tick() is False                      # nothing changed: no refresh, no write
    assert timer.annotator.counts == {"written": 1}
    # the prediction moves by 30 s (< threshold): refreshed, not written
    core.jobs["run"].pred_duration = 630.0
    core.eta.version += 1
    assert timer.tick() is True and bridge.etas["wait"] == ["2027-01-15T08:10:00Z in 600s"]
    assert timer.annotator.counts == {"written": 1, "unchanged": 1}
    # by 90 s against the value written (> threshold): written again, seconds from the new now
    clock.t = T0 + 100
    core.jobs["run"].pred_duration = 690.0
    core.eta.version += 1
    assert timer.tick() is True
    assert bridge.etas["wait"][-1] == "2027-01-15T08:11:30Z in 590s"
    assert timer.annotator.counts == {"written": 2, "unchanged": 1}


def test_refresh_made_by_the_queue_api_is_annotated_by_the_next_tick():
    clock, core, bridge, service = setup()
    timer = EtaRefresher(core.eta, 1.0, EtaAnnotator(bridge.write_eta, threshold=0.0))
    core.queue()                          # the queue API refreshed first
    assert core.eta.refreshes == 1
    assert timer.tick() is False          # no second forward run ...
    assert bridge.etas == {"wait": ["2027-01-15T08:10:00Z in 600s"]}   # ... but its estimates are written


def test_failed_writes_are_counted_and_retried():
    clock, core, bridge, service = setup()
    calls = []

    def refuse(pod, text):
        calls.append(text)
        return "(422) the pod is bound already or has another uid"
    timer = EtaRefresher(core.eta, 1.0, EtaAnnotator(refuse, threshold=60.0))
    timer.tick()
    core.eta.version += 1
    timer.tick()
    assert len(calls) == 2 and timer.annotator.counts == {"failed": 2}


def test_a_pod_that_started_is_forgotten_by_the_annotator():
    clock, core, bridge, service = setup()
    annotator = EtaAnnotator(bridge.write_eta, threshold=60.0)
    timer = EtaRefresher(core.eta, 1.0, annotator)
    timer.tick()
    assert set(annotator.written) == {"wait"}
    clock.t = T0 + 600
    core.pod_seen(PodFacts("run", "default", "run", 8, created=0.0, phase="Succeeded"))
    core.run_pass()                        # "wait" is nominated: no longer pending
    timer.tick()
    assert annotator.written == {} and bridge.etas["wait"] == ["2027-01-15T08:10:00Z in 600s"]


def test_the_service_timer_runs_in_its_own_thread_and_stops():
    clock, core, bridge, service = setup()
    service.eta_interval = 0.05
    service.start_eta_timer()
    try:
        deadline = time.monotonic() + 10
        while "wait" not in bridge.etas and time.monotonic() < deadline:
            time.sleep(0.02)
        assert bridge.etas["wait"] == ["2027-01-15T08:10:00Z in 600s"]
        stats = service.eta_timer.stats()
        assert stats["refreshes"] == 1 and stats["annotations"]["written"] == 1 and stats["errors"] == 0
    finally:
        service.stop()
    ticks = service.eta_timer.ticks
    time.sleep(0.2)
    assert service.eta_timer.ticks == ticks   # stopped with the service


def test_no_timer_when_the_interval_is_zero():
    clock, core, bridge, service = setup()
    service.eta_interval = 0
    service.start_eta_timer()
    assert service.eta_timer is None


def test_dashboard_eta_column():
    assert [_when(s) for s in (None, 0.0, 89.0, 90.0, 7199.0, 7200.0, 9000.0)] == \
        ["–", "in 0 min", "in 1 min", "in 2 min", "in 120 min", "in 2.0 h", "in 2.5 h"]
    clock, core, bridge, service = setup()
    from dlsched.service.dashboard import dashboard_data

    data = dashboard_data(service)
    (row,) = data["queue"]
    assert row["eta"] == T0 + 600 and row["eta_in_s"] == 600.0
    body = render_body(data)
    assert "<th>ETA</th>" in body and "<td>in 10 min</td></tr>" in body


def test_eta_endpoint_reports_the_timer():
    pytest.importorskip("fastapi")
    from support.live_app import LiveApp

    from dlsched.service.app import build_app

    clock, core, bridge, service = setup()
    with LiveApp(build_app(service)) as app:
        before = app.call("GET", "/api/v1/eta")
        assert before["timer"] is None and before["refreshes"] == 0
        service.eta_timer = EtaRefresher(core.eta, 1.0, EtaAnnotator(bridge.write_eta, 60.0))
        service.eta_timer.tick()
        after = app.call("GET", "/api/v1/eta")
        assert after["refreshes"] == 1 and after["last_refresh_at"] == T0
        assert after["timer"]["annotations"] == {"threshold_s": 60.0, "written": 1, "unchanged": 0,
                                                  "no_estimate": 0, "imminent": 0, "not_pending": 0,
                                                  "failed": 0}
