"""What-if (dlsched.sim.whatif): one state run forward under the current and another policy,
hand-checked per job and per queue; the real state untouched."""

from __future__ import annotations

import json
import math

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState
from dlsched.registry import make_policy
from dlsched.sim.eta import EtaEstimator
from dlsched.sim.whatif import what_if


def job(jid: str, vc: str, gpus: int, pred: float, submit: float = 0.0) -> Job:
    j = Job(jid, vc, gpus, submit, 999.0)
    j.pred_duration = pred
    return j


def hand_state(policy) -> ClusterState:
    """One 8-GPU node in VC v: a (8 GPUs, predicted 100 s) runs from 0; b (8, 50), c (4, 20) and
    d (4, 30) wait in that order (submitted at 0). VC w (one 8-GPU node) runs nothing; e (2, 10)
    waits there."""
    state = ClusterState(ClusterSpec.from_vc_sizes({"v": 1, "w": 1}, gpus_per_node=8), new_queue=policy.new_queue)
    state.begin(0.0)
    a = job("a", "v", 8, 100.0)
    state.submit(a, 0.0)
    state.start(a, ((0, 0xFF),), 0.0)
    for j in (job("b", "v", 8, 50.0), job("c", "v", 4, 20.0), job("d", "v", 4, 30.0), job("e", "w", 2, 10.0)):
        state.submit(j, 0.0)
    return state


def test_fifo_against_qssf_hand_checked():
    fifo = make_policy("fifo", "consolidate")
    state = hand_state(fifo)
    w = what_if(EtaEstimator(fifo), make_policy("qssf", "consolidate"), state, 0.0)
    # FIFO: b when a ends (100), c and d side by side when b ends (150); e at once on w.
    # QSSF orders by GPUs x predicted duration: c (80), d (120), b (400): c and d at 100,
    # c ends at 120, d at 130, then b at 130.
    rows = {j.job_id: (j.current, j.other, j.diff) for j in w.jobs}
    assert rows == {"b": (100.0, 130.0, 30.0), "c": (150.0, 100.0, -50.0), "d": (150.0, 100.0, -50.0),
                    "e": (0.0, 0.0, 0.0)}
    s = w.summary()
    assert s["jobs"] == s["compared"] == 4
    assert s["mean_wait_current"] == pytest.approx((100 + 150 + 150 + 0) / 4)
    assert s["mean_wait_other"] == pytest.approx((130 + 100 + 100 + 0) / 4)
    assert s["mean_wait_change"] == pytest.approx(-70 / 4)
    assert (s["median_wait_current"], s["median_wait_other"], s["median_wait_change"]) == (125.0, 100.0, -25.0)
    assert (s["earlier"], s["later"], s["same"], s["never_current"], s["never_other"]) == (2, 1, 1, 0, 0)
    q = w.by_queue()
    assert list(q) == ["v", "w"]
    assert q["v"]["mean_wait_change"] == pytest.approx(-70 / 3) and q["v"]["median_wait_change"] == -50.0
    assert q["w"]["mean_wait_change"] == 0.0 and q["w"]["same"] == 1
    # nothing of the real state moved
    assert state.n_running == 1 and state.n_pending == 4
    state.check_invariants()


def test_same_policy_changes_nothing_and_as_dict_is_json_ready():
    fifo = make_policy("fifo", "consolidate")
    w = what_if(EtaEstimator(fifo), make_policy("fifo", "consolidate"), hand_state(fifo), 0.0)
    assert all(j.diff == 0.0 for j in w.jobs) and w.summary()["same"] == 4
    d = w.as_dict({"b": "default/b"})
    assert d["current_policy"] == d["other_policy"] == "fifo"
    assert d["jobs"][0] == {"job": "default/b", "vc": "v", "gpus": 8, "current": 100.0, "other": 100.0, "diff_s": 0.0}


def test_a_job_that_never_starts_is_counted_apart():
    fifo = make_policy("fifo", "consolidate")
    state = hand_state(fifo)
    w = what_if(EtaEstimator(fifo, max_events=2), make_policy("qssf", "consolidate"), state, 0.0)
    # two finish events (e at 10, a at 100): FIFO starts b at 100 then stops; QSSF c and d, never b
    rows = {j.job_id: (j.current, j.other) for j in w.jobs}
    assert rows["b"] == (100.0, math.inf) and rows["c"] == (math.inf, 100.0)
    s = w.summary()
    assert (s["never_current"], s["never_other"], s["compared"]) == (2, 1, 1)
    assert w.as_dict()["jobs"][0]["other"] is None


def test_live_whatif_endpoint():
    """GET /api/v1/whatif on the live state: the hand-checked FIFO vs QSSF example through the API;
    the operator token; a bad policy or parameter is a 400 naming it."""
    pytest.importorskip("fastapi")
    pytest.importorskip("sqlalchemy")
    import urllib.error

    from support.live_app import FakeBridge, LiveApp

    from dlsched.cli.policy_factory import build_policy
    from dlsched.service.app import build_app
    from dlsched.service.core import SchedulerCore
    from dlsched.service.pods import NodeFacts, PodFacts
    from dlsched.service.runtime import LiveService
    from dlsched.service.store import Store

    now = [1000.0]
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"), clock=lambda: now[0])
    core.node_seen(NodeFacts("n", 8, "default", "", False))
    service = LiveService(core, FakeBridge(), token="tok")
    service.policy_factory = lambda name, params, place: build_policy(name, params, place)
    passed, _ = core.filter(PodFacts("a", "default", "a", 8, created=0.0), ["n"])
    assert passed == ["n"] and service.bind("default", "a", "a", "n") == ""
    for uid, gpus in (("b", 8), ("c", 4), ("d", 4)):
        core.pod_seen(PodFacts(uid, "default", uid, gpus, created=0.0))
    for uid, pred in (("a", 100.0), ("b", 50.0), ("c", 20.0), ("d", 30.0)):
        core.jobs[uid].pred_duration = pred
    core.run_pass()
    with LiveApp(build_app(service)) as app:
        with pytest.raises(urllib.error.HTTPError) as err:
            app.call("GET", "/api/v1/whatif?policy=qssf")
        assert err.value.code == 403
        got = app.call("GET", "/api/v1/whatif?policy=qssf", token="tok")
        assert (got["current_policy"], got["other_policy"], got["now"]) == ("fifo", "qssf", 1000.0)
        rows = {r["job"]: (r["current"] - 1000.0, r["other"] - 1000.0, r["diff_s"]) for r in got["jobs"]}
        assert rows == {"default/b": (100.0, 130.0, 30.0), "default/c": (150.0, 100.0, -50.0),
                        "default/d": (150.0, 100.0, -50.0)}
        s = got["queues"]["default"]
        assert (s["earlier"], s["later"], s["median_wait_change"]) == (2, 1, -50.0)
        assert s["mean_wait_change"] == pytest.approx(-70 / 3)
        # a parameter of the policy reaches it
        got = app.call("GET", "/api/v1/whatif?policy=las&param=queues=2&param=threshold=60", token="tok")
        assert got["other_policy"] == "las" and len(got["jobs"]) == 3
        for query, needle in (("policy=nosuch", "unknown policy 'nosuch'"),
                              ("policy=qssf&param=bogus=1", "no parameter 'bogus'"),
                              ("policy=qssf&param=lam", "param 'lam': want KEY=VALUE")):
            with pytest.raises(urllib.error.HTTPError) as err:
                app.call("GET", f"/api/v1/whatif?{query}", token="tok")
            assert err.value.code == 400
            detail = json.loads(err.value.read())["detail"]
            assert detail.startswith(f"policy={query.split('&')[0].split('=')[1]}") and needle in detail, detail
    assert core.state.n_pending == 3 and core.state.n_running == 1
    core.state.check_invariants()
