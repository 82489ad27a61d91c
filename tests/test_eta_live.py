"""Live ETAs: ``SchedulerCore.queue()`` and ``GET /api/v1/queue`` carry the forward-simulation
estimate of every pending pod (hand-checked), cached until the state changes."""

from __future__ import annotations

import re

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def setup(policy: str = "fifo", placement: str | None = "consolidate"):
    core = SchedulerCore(make_policy(policy, placement), Store("sqlite://"), clock=iter(range(1000, 10**6)).__next__)
    core.node_seen(NodeFacts("n", 8, "default", "", False))
    return core, LiveService(core, Bridge())


def pod(uid: str, gpus: int) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, created=0.0)


def running_and_waiting(core, service) -> float:
    """p1 (8 GPUs, predicted 100 s) runs; p2 (8, 50 s), p3 (4, 20 s), p4 (4, 30 s) wait. Returns
    p1's start."""
    passed, _ = core.filter(pod("p1", 8), ["n"])
    assert passed == ["n"] and service.bind("default", "p1", "p1", "n") == ""
    for uid, gpus in (("p2", 8), ("p3", 4), ("p4", 4)):
        core.pod_seen(pod(uid, gpus))
    for uid, pred in (("p1", 100.0), ("p2", 50.0), ("p3", 20.0), ("p4", 30.0)):
        core.jobs[uid].pred_duration = pred
    core.run_pass()
    return core.jobs["p1"].run_since


def test_queue_lists_the_hand_checked_etas_of_the_pending_pods():
    core, service = setup()
    t1 = running_and_waiting(core, service)
    rows = {q["uid"]: q for q in core.queue()}
    # p1 ends at t1 + 100: p2 starts; p2 ends at t1 + 150: p3 and p4 start side by side
    assert {u: q["eta"] for u, q in rows.items()} == {"p2": t1 + 100, "p3": t1 + 150, "p4": t1 + 150}
    assert all(q["eta_in_s"] == pytest.approx(q["eta"] - core._now, abs=2.0) for q in rows.values())
    assert core.jobs["p2"].state.name == "PENDING" and core.state.n_running == 1   # the real state untouched
    core.state.check_invariants()


def test_etas_are_cached_until_the_state_changes():
    core, service = setup()
    running_and_waiting(core, service)
    core.queue()
    assert core.eta.refreshes == 1
    core.queue()
    assert core.eta.refreshes == 1           # nothing changed: the cached estimates
    core.pod_seen(pod("p5", 1))
    core.jobs["p5"].pred_duration = 10.0
    rows = {q["uid"]: q["eta"] for q in core.queue()}
    assert core.eta.refreshes == 2 and set(rows) == {"p2", "p3", "p4", "p5"}
    assert rows["p5"] == rows["p3"] + 20.0    # p3 and p4 fill the node; p3 (20 s) frees a GPU first


def test_a_parked_pod_has_no_eta():
    core, _ = setup()
    core.pod_seen(pod("big", 16))            # no node of its VC can hold it
    (row,) = core.queue()
    assert row["rank"] == -1 and row["eta"] is None and row["eta_in_s"] is None


def test_qssf_live_estimator_is_not_advanced_by_the_forward_run():
    core, service = setup("qssf")
    running_and_waiting(core, service)
    est = core.policy.estimator
    before = (est._now, est.n_observed)
    rows = core.queue()
    assert len(rows) == 3 and all(q["eta"] is not None for q in rows)
    assert (est._now, est.n_observed) == before


def test_horus_queue_gets_etas_through_a_copied_policy():
    core = SchedulerCore(make_policy("horus", None, share=True), Store("sqlite://"), max_jobs_per_gpu=2,
                         clock=iter(range(1000, 10**6)).__next__,
                         predict=lambda j: setattr(j, "pred_gpu_mem_mib", 20000.0) or setattr(j, "pred_gpu_util", 40.0))
    core.node_seen(NodeFacts("n", 1, "default", "", False))
    service = LiveService(core, Bridge())
    p = PodFacts("j1", "default", "j1", 1, annotations={"dlsched.io/model": "m"})
    assert core.filter(p, ["n"])[0] == ["n"] and service.bind("default", "j1", "j1", "n") == ""
    core.pod_seen(PodFacts("j2", "default", "j2", 1, annotations={"dlsched.io/model": "m"}))
    core.jobs["j1"].pred_duration, core.jobs["j2"].pred_duration = 60.0, 30.0
    (row,) = core.queue()
    assert row["uid"] == "j2" and row["eta"] == core.jobs["j1"].run_since + 60.0


def test_queue_endpoint_carries_the_eta_fields():
    pytest.importorskip("fastapi")
    from fastapi.testclient import TestClient

    from dlsched.service.app import build_app

    core, service = setup()
    t1 = running_and_waiting(core, service)
    body = TestClient(build_app(service)).get("/api/v1/queue").json()
    assert {q["uid"]: q["eta"] for q in body} == {"p2": t1 + 100, "p3": t1 + 150, "p4": t1 + 150}
    assert all(q["eta_in_s"] >= 0 for q in body)


def test_finished_pods_calibrate_the_predictions():
    core, service = setup()
    t1 = running_and_waiting(core, service)
    core.eta.calibration.min_jobs = 1
    # p1 was predicted 100 s; it finishes after 200 s of the service clock: factor 2
    core.clock = lambda: t1 + 200.0
    core.pod_seen(PodFacts("p1", "default", "p1", 8, node_name="n", phase="Succeeded"))
    assert core.eta.calibration.factor == pytest.approx(2.0)
    rows = {q["uid"]: q["eta"] for q in core.queue()}   # no pass has run since: p2 still waits
    # p2 may start now (t1 + 200) and is expected to run 2 x 50 s: p3 and p4 start at t1 + 300
    assert rows == {"p2": t1 + 200.0, "p3": t1 + 300.0, "p4": t1 + 300.0}


def test_the_filter_reason_quotes_the_last_refresh_only():
    core, service = setup()
    running_and_waiting(core, service)
    passed, failed = core.filter(pod("p3", 4), ["n"])
    assert passed == [] and "estimated start" not in failed["n"]   # no refresh yet: none quoted
    assert core.eta.refreshes == 0                                  # and the filter did not refresh
    core.queue()
    passed, failed = core.filter(pod("p3", 4), ["n"])
    assert passed == [] and failed["n"].startswith("queued by dlsched (fifo): 1 of 3 pending jobs")
    # p3 starts at t1 + 150 s; the test clock ticks one second per reading
    assert re.search(r"; estimated start in [12] min \(forward simulation, fifo\)$", failed["n"]), failed["n"]
    assert core.eta.refreshes == 1
