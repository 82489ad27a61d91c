"""Issue 22 against the real control plane (etcd + kube-apiserver + kube-scheduler v1.20.2 from
../shared/k8s, kubelet-less nodes): what an independent end-to-end run found, reproduced.

* a filter and a bind carrying an existing pod's namespace/name with a made-up uid must not
  rewrite that pod's ``dlsched.io/gpus`` (one GPU, two holders after a restart); nor may the
  bridge's annotation patch touch a pod that is bound or has another uid;
* a pod requesting ``nvidia.com/gpu: 0`` is bound, untouched;
* a pod whose nodeSelector excludes the node dlsched prefers is bound on a node kube-scheduler
  offered (it was nominated off them, forgotten and nominated there again, forever);
* a filter call about a pod the API server does not have stops holding GPUs after the TTL, and
  the pod waiting for them is nudged (kube-scheduler would retry it only after 60 s).
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod
from support.service_proc import ServiceProcess

TTL = 3.0
PRODUCT = "nvidia.com/gpu.product"


@pytest.fixture(scope="module")
def live(shared, tmp_path_factory):
    with extender_control_plane(shared) as (cp, port):
        add_gpu_node(cp, "gpu-0", 4)
        add_gpu_node(cp, "big-0", 8)
        add_gpu_node(cp, "t4-0", 4, {PRODUCT: "Tesla-T4"})
        add_gpu_node(cp, "nudge-0", 1, {"dlsched.io/vc": "nudge"})
        tmp = tmp_path_factory.mktemp("safety")
        # no ETA annotations here: writing one on the waiting pod is a pod update too, which moves it
        # out of kube-scheduler's unschedulable queue like the nudge does, so the nudge test would
        # race the ETA timer (CI saw the pod bound before the nudge landed: nudges_failed 1)
        svc = ServiceProcess(port, cp.api_url, cp.token, f"sqlite:///{tmp}/safety.db", "fifo", tmp / "svc.log",
                             extra=("--unseen-pod-ttl", str(TTL), "--eta-interval", "0"))
        svc.start()
        try:
            yield cp, svc
        finally:
            svc.stop()


def _post(url: str, body: object) -> tuple[int, object]:
    req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def _create(cp, body: dict) -> dict:
    status, pod = cp.request("POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201, pod
    return pod


def _wait_bound(cp, name: str, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        _, pod = cp.request("GET", f"/api/v1/namespaces/default/pods/{name}")
        if pod["spec"].get("nodeName") or time.monotonic() > deadline:
            return pod
        time.sleep(0.1)


def _delete(cp, name: str) -> None:
    cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")


def _fake_pod(uid: str, name: str, gpus: int, labels: dict | None = None) -> dict:
    pod = gpu_pod(name, gpus, "fake")
    pod["metadata"].update({"uid": uid, "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z"})
    pod["metadata"]["labels"].update(labels or {})
    pod["spec"]["schedulerName"] = "default-scheduler"
    return pod


def _gpus(pod: dict) -> str | None:
    return (pod["metadata"].get("annotations") or {}).get("dlsched.io/gpus")


def test_a_made_up_uid_never_rewrites_the_gpus_of_a_bound_pod(live):
    cp, svc = live
    _create(cp, gpu_pod("victim", 1, "victim"))
    victim = _wait_bound(cp, "victim", 60)
    node, held = victim["spec"].get("nodeName"), _gpus(victim)
    assert node and held is not None, victim
    fake = "00000000-0000-4000-8000-000000000001"
    status, out = _post(svc.url + "/scheduler/filter", {"Pod": _fake_pod(fake, "victim", 1),
                                                        "NodeNames": ["gpu-0", "big-0", "t4-0"]})
    assert status == 200 and not out["NodeNames"], out          # not nominated
    assert "uid" in next(iter(out["FailedNodes"].values()))
    for target in ("gpu-0", "big-0", "t4-0"):
        status, out = _post(svc.url + "/scheduler/bind", {"PodName": "victim", "PodNamespace": "default",
                                                          "PodUID": fake, "Node": target})
        assert status == 200 and out["Error"], out
    _, after = cp.request("GET", "/api/v1/namespaces/default/pods/victim")
    assert (after["spec"]["nodeName"], _gpus(after)) == (node, held)
    assert after["metadata"]["resourceVersion"] == victim["metadata"]["resourceVersion"]   # never written
    _delete(cp, "victim")


def test_the_bridge_annotates_only_the_pending_pod_with_that_uid(live):
    """The API call itself, whatever the core decided: a JSON patch with uid and nodeName tests."""
    from dlsched.service.kube import KubeBridge, make_api

    cp, _ = live
    api = make_api(None, cp.api_url, cp.token, insecure=True)
    bridge = KubeBridge(api, core=None)
    pending = _create(cp, {**gpu_pod("held", 1, "bridge"), "spec": {**gpu_pod("held", 1, "bridge")["spec"],
                                                                    "schedulerName": "nobody"}})
    uid = pending["metadata"]["uid"]
    made_up = "00000000-0000-4000-8000-000000000002"
    err = bridge.bind("default", "held", made_up, "big-0", [3])
    assert "uid" in err and "422" in err, err
    _, pod = cp.request("GET", "/api/v1/namespaces/default/pods/held")
    assert _gpus(pod) is None and not pod["spec"].get("nodeName")
    assert bridge.bind("default", "held", uid, "big-0", [2], annotated=False) == ""   # the right uid: bound
    _, pod = cp.request("GET", "/api/v1/namespaces/default/pods/held")
    assert (pod["spec"]["nodeName"], _gpus(pod)) == ("big-0", "2")
    err = bridge.bind("default", "held", uid, "gpu-0", [0])                  # bound already: refused
    assert err and "422" in err, err
    _, pod = cp.request("GET", "/api/v1/namespaces/default/pods/held")
    assert (pod["spec"]["nodeName"], _gpus(pod)) == ("big-0", "2")
    _delete(cp, "held")


def test_a_pod_requesting_zero_gpus_is_bound_untouched(live):
    cp, _ = live
    _create(cp, gpu_pod("zero", 0, "zero"))
    pod = _wait_bound(cp, "zero", 30)
    assert pod["spec"].get("nodeName"), "a pod with nvidia.com/gpu: 0 was never bound"
    assert _gpus(pod) is None
    _delete(cp, "zero")


def test_a_made_up_uid_of_a_zero_gpu_pod_binds_nothing(live):
    """v1.20 does not check a Binding's uid: without the uid test, a filter and a bind carrying a
    made-up uid would bind any pending pod (another scheduler's here) to the node named."""
    cp, svc = live
    body = gpu_pod("other", 0, "other")
    body["spec"]["schedulerName"] = "nobody"
    _create(cp, body)
    fake = "00000000-0000-4000-8000-000000000004"
    status, out = _post(svc.url + "/scheduler/filter", {"Pod": _fake_pod(fake, "other", 0), "NodeNames": ["gpu-0"]})
    assert status == 200 and out["NodeNames"] == ["gpu-0"], out
    status, out = _post(svc.url + "/scheduler/bind", {"PodName": "other", "PodNamespace": "default",
                                                      "PodUID": fake, "Node": "gpu-0"})
    assert status == 200 and "uid" in out["Error"], out
    _, pod = cp.request("GET", "/api/v1/namespaces/default/pods/other")
    assert not pod["spec"].get("nodeName")
    _delete(cp, "other")


def test_a_node_selector_is_honoured_where_dlsched_prefers_another_node(live):
    cp, svc = live
    # on mixed nodes consolidate takes the node with the most free GPUs (big-0); the selector
    # allows the 4-GPU T4 node only
    body = gpu_pod("picky", 1, "picky")
    body["spec"]["nodeSelector"] = {PRODUCT: "Tesla-T4"}
    _create(cp, body)
    pod = _wait_bound(cp, "picky", 30)
    assert pod["spec"].get("nodeName") == "t4-0", (pod["spec"].get("nodeName"), svc.get("/api/v1/queue"))
    # and a pod without a selector still goes where the policy prefers
    _create(cp, gpu_pod("plain", 1, "plain"))
    assert _wait_bound(cp, "plain", 30)["spec"].get("nodeName") == "big-0"
    _delete(cp, "picky")
    _delete(cp, "plain")


def test_a_filter_for_a_pod_that_does_not_exist_expires_and_the_waiting_pod_is_nudged(live):
    cp, svc = live
    ghost = _fake_pod("00000000-0000-4000-8000-000000000003", "ghost", 1, {"dlsched.io/vc": "nudge"})
    status, out = _post(svc.url + "/scheduler/filter", {"Pod": ghost, "NodeNames": ["nudge-0"]})
    assert status == 200 and out["NodeNames"] == ["nudge-0"], out        # the ghost holds the one GPU
    created = time.monotonic()
    body = gpu_pod("waiter2", 1, "waiter")
    body["metadata"]["labels"]["dlsched.io/vc"] = "nudge"
    _create(cp, body)
    pod = _wait_bound(cp, "waiter2", 20)
    waited = time.monotonic() - created
    assert pod["spec"].get("nodeName") == "nudge-0", (waited, svc.get("/api/v1/state"), svc.log()[-3000:])
    assert waited < TTL + 10, waited            # kube-scheduler alone would retry it after 60 s
    state = svc.get("/api/v1/state")
    assert state["counters"].get("nominations expired (pod unknown to the API server)") == 1, state["counters"]
    assert state["binds"].get("nudges", 0) >= 1, state["binds"]
    _delete(cp, "waiter2")
