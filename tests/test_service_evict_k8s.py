"""Live preemption end to end on a real v1.20.2 control plane (etcd + kube-apiserver +
kube-scheduler from ../shared/k8s; no kubelet and no controller-manager, so the test plays both:
it marks a bound pod Running, deletes an evicting pod once its deletion timestamp is set, and
creates the evicted job's new pod as a Job controller would).

The done-when scenario of issue 26: a long pod runs; a short pod with a higher policy priority
(SRTF by predicted remaining time, ``tests/support/evict_policy.py``) arrives; the long pod is
evicted through the Eviction API with its grace period and a ``Preempted`` event; the short pod is
bound; the long job's new pod is matched, re-queued with its attained service and re-bound.
The simulator, fed the same arrivals, starts the jobs in the same order. And crash safety: a
``kill -9`` between the intent's write and the API call; the restart evicts exactly once
(counted by the API server's own request metrics).
"""

from __future__ import annotations

import re
import time

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod  # noqa: E402
from support.evict_policy import PredictedSrtf  # noqa: E402
from support.service_proc import REPO, ServiceProcess  # noqa: E402

PODS = "/api/v1/namespaces/default/pods"
LAUNCH = ("import sys; sys.path.insert(0, {!r}); from support.evict_policy import serve_main; serve_main()".format(str(REPO / "tests")))


@pytest.fixture(scope="module")
def cluster(shared, tmp_path_factory):
    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-0", 4)
        yield cp, port, tmp_path_factory.mktemp("evict")


def service(cp, port, tmp, tag: str) -> ServiceProcess:
    svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp}/{tag}.db", "test-srtf-pred",
                         tmp / f"{tag}.log", extra=("--eta-interval", "0", "--queues-configmap", ""))
    svc.argv[1:3] = ["-c", LAUNCH]   # dlsched serve, with the test policy registered
    return svc


def job_pod(name: str, model: str, tag: str, job: str | None = None, grace: int | None = None) -> dict:
    ann = {"dlsched.io/model": model}
    if grace is not None:
        ann["dlsched.io/grace-seconds"] = str(grace)
    body = gpu_pod(name, 4, tag, ann)
    if job:
        body["metadata"]["labels"]["dlsched.io/job"] = job
    return body


def create(cp, body: dict) -> None:
    status, out = cp.request("POST", PODS, body)
    assert status == 201, out


def get(cp, name: str) -> dict | None:
    status, pod = cp.request("GET", f"{PODS}/{name}")
    return pod if status == 200 else None


def wait_for(what: str, probe, timeout: float = 30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def bound(cp, name: str) -> dict | None:
    pod = get(cp, name)
    return pod if pod and pod["spec"].get("nodeName") else None


def run(cp, name: str) -> None:
    """Play kubelet: the bound pod is Running."""
    status, out = cp.request("PATCH", f"{PODS}/{name}/status", {"status": {"phase": "Running"}},
                             content_type="application/merge-patch+json")
    assert status == 200, out


def evictions_at_api_server(cp) -> int:
    """POSTs to pods/eviction the API server has served (its apiserver_request_total metric)."""
    status, text = cp.request("GET", "/metrics")
    assert status == 200
    total = 0
    for line in str(text).splitlines():
        if line.startswith("apiserver_request_total{") and 'subresource="eviction"' in line \
                and 'verb="POST"' in line:
            total += int(float(line.rsplit(" ", 1)[1]))
    return total


def nudge(cp) -> None:
    cp.request("PATCH", "/api/v1/nodes/gpu-0", {"metadata": {"labels": {"nudge": str(time.monotonic_ns())}}},
               content_type="application/strategic-merge-patch+json")


def test_a_short_pod_evicts_a_long_one_which_is_requeued_and_rebound_in_the_simulators_order(cluster):
    cp, port, tmp = cluster
    svc = service(cp, port, tmp, "scenario").start()
    try:
        t0 = time.monotonic()
        create(cp, job_pod("long-0", "long", "scn", job="train", grace=5))
        wait_for("long-0 bound", lambda: bound(cp, "long-0"))
        run(cp, "long-0")
        before = evictions_at_api_server(cp)
        create(cp, job_pod("short-0", "short", "scn"))
        # evicted with the pod's grace period: the API server set the deletion timestamp
        pod = wait_for("long-0's eviction", lambda: (p := get(cp, "long-0")) and p["metadata"].get(
            "deletionTimestamp") and p)
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 5
        assert evictions_at_api_server(cp) - before == 1
        events = wait_for("the Preempted event", lambda: [
            e for e in cp.request("GET", "/api/v1/namespaces/default/events")[1]["items"]
            if e["reason"] == "Preempted" and e["involvedObject"]["name"] == "long-0"])
        assert "for default/short-0" in events[0]["message"] and "grace 5 s" in events[0]["message"]
        assert not bound(cp, "short-0")   # the GPUs stay the long pod's while it checkpoints
        # play the Job controller (a new pod of the job) and kubelet (the old pod gone)
        create(cp, job_pod("long-1", "long", "scn", job="train", grace=5))
        status, _ = cp.request("DELETE", f"{PODS}/long-0?gracePeriodSeconds=0")
        assert status == 200
        held = time.monotonic() - t0   # an upper bound of the time long-0 held its GPUs
        wait_for("short-0 bound", lambda: bound(cp, "short-0"))
        run(cp, "short-0")
        assert not bound(cp, "long-1")
        cp.request("DELETE", f"{PODS}/short-0?gracePeriodSeconds=0")   # the short job finished
        nudge(cp)
        wait_for("long-1 bound", lambda: bound(cp, "long-1") or nudge(cp))
        # the bind is logged once the API server answered it, which may be after the test saw it
        decisions = wait_for("long-1's bind in the log", lambda: (d := svc.decisions()) and any(
            x["kind"] in ("bind", "confirm") and x["pod"] == "default/long-1" for x in d) and d)
        queue_state = svc.get("/api/v1/state")
    finally:
        svc.stop()
        for name in ("long-0", "short-0", "long-1"):
            cp.request("DELETE", f"{PODS}/{name}?gracePeriodSeconds=0")
    binds = [d["pod"] for d in decisions if d["kind"] in ("bind", "confirm")]
    live_order = [p.rpartition("/")[2].rpartition("-")[0] for p in binds]
    assert live_order == ["long", "short", "long"], binds
    evict = [d for d in decisions if d["kind"] == "evict"]
    assert len(evict) == 1 and evict[0]["detail"].startswith(
        "evicted default/long-0 for default/short-0: preempted by the policy (grace 5 s)")
    requeue = [d for d in decisions if d["kind"] == "requeue"]
    assert len(requeue) == 1 and requeue[0]["pod"] == "default/long-1" and "evictions 1" in requeue[0]["detail"]
    attained = float(re.search(r"attained ([\d.]+) GPU-s", requeue[0]["detail"]).group(1))
    assert 0 < attained <= 4 * held + 0.1   # four GPUs from its bind until the test deleted it
    assert queue_state["counters"].get("evictions accepted") == 1
    assert simulated_start_order() == live_order


def simulated_start_order() -> list[str]:
    """The same arrivals (long at 0 s, short at 10 s; one 4-GPU node) in the simulator."""
    from dlsched.core.cluster import ClusterSpec, NodeSpec
    from dlsched.core.job import Job
    from dlsched.kernel.decisions import Start
    from dlsched.registry import make_policy
    from dlsched.sim.engine import simulate

    starts: list[str] = []

    class Recording(PredictedSrtf):
        def schedule(self, view, vc):
            for decision in super().schedule(view, vc):
                if type(decision) is Start:
                    starts.append(decision[0].model_name)
                yield decision

    jobs = [Job("long-0", "default", 4, 0.0, 3600.0, model_name="long"),
            Job("short-0", "default", 4, 10.0, 60.0, model_name="short")]
    simulate(jobs, ClusterSpec([NodeSpec("gpu-0", "default", 4)], {"default": 4}),
             Recording(make_policy("fifo").placer))
    return starts


def test_kill9_between_the_intent_and_the_api_call_evicts_exactly_once_after_the_restart(cluster, monkeypatch):
    cp, port, tmp = cluster
    svc = service(cp, port, tmp, "crash").start()
    try:
        create(cp, job_pod("crash-long", "long", "crash", job="crash-train", grace=3))
        wait_for("crash-long bound", lambda: bound(cp, "crash-long"))
        run(cp, "crash-long")
    finally:
        svc.stop()
    before = evictions_at_api_server(cp)
    monkeypatch.setenv("DLSCHED_FAULT", "kill-before-evict")
    svc.start()
    monkeypatch.delenv("DLSCHED_FAULT")
    create(cp, job_pod("crash-short", "short", "crash"))
    wait_for("the injected kill -9", lambda: svc.proc.poll() is not None)
    assert svc.proc.returncode == -9
    assert "kill-before-evict" in svc.log()
    assert evictions_at_api_server(cp) == before        # killed before the call
    assert not get(cp, "crash-long")["metadata"].get("deletionTimestamp")
    svc.start()
    try:
        pod = wait_for("crash-long's eviction", lambda: (p := get(cp, "crash-long")) and p["metadata"].get(
            "deletionTimestamp") and p)
        assert pod["metadata"]["deletionGracePeriodSeconds"] == 3
        time.sleep(2.0)   # passes meanwhile must not evict it again
        nudge(cp)
        time.sleep(1.0)
        assert evictions_at_api_server(cp) - before == 1
        rows = svc.decisions()
    finally:
        svc.stop()
    svc.start()   # a second restart: the intent is done, nothing is sent
    try:
        time.sleep(2.0)
        assert evictions_at_api_server(cp) - before == 1
    finally:
        svc.stop()
        cp.request("DELETE", f"{PODS}/crash-long?gracePeriodSeconds=0")
        cp.request("DELETE", f"{PODS}/crash-short?gracePeriodSeconds=0")
    assert [d["kind"] for d in rows].count("evict") == 1
    assert [d["kind"] for d in rows].count("evicted") == 1
