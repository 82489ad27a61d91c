"""``--gpu-binding envvar-configmap`` on a real control plane (etcd, kube-apiserver and
kube-scheduler v1.20.2 from ../shared/k8s; kube-scheduler alone, no extender, binds the pods of
default-scheduler). dlsched runs ``--mode scheduler`` and serves its mutating webhook over TLS
on 127.0.0.1 with a CA made at start-up, registered with the API server.

The shared kube-apiserver (v1.20.2 rebuilt with Go 1.19) crashes on *any* mutating webhook's
JSON patch (SIGSEGV in vendored modern-go/reflect2 while it writes the patch audit annotation,
``mutating/dispatcher.go:428``: reflect2 before 1.0.2 breaks under Go >= 1.18). So here the
API server calls the webhook over TLS for every pod (registration, caBundle, SAN checked by it)
and the webhook answers without a patch; dlsched pods are created in the form the webhook's
patch gives (``mutation.plan`` applied by the test: the same ops), which the webhook then leaves
alone. tests/test_gpu_binding.py checks the patch itself.

Checks: the API server calls the registered webhook for a dlsched pod and another scheduler's
pod, and the other pod is untouched; the ConfigMap holds the chosen GPUs and is created before the Binding (audit log);
reservation pods hold those GPUs (kube-scheduler then cannot hand them to its own pod: 8 GPUs
do not fit, 4 do) and go once the pod is gone; a node whose set-up cannot bind (MIG) is left
out by the node checks (the pod is Unschedulable, saying why); a pod the webhook left alone is
bound and reported in the state, the dashboard and by a ``GpuChoiceNotBound`` event.
"""

from __future__ import annotations

import time
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import (  # noqa: E402
    add_gpu_node,
    audit_writes,
    cleanup,
    free_port,
    gpu_pod,
    missing_reason,
    start_control_plane,
)
from support.json_patch import apply_patch  # noqa: E402
from support.polling import poll
from support.service_proc import ServiceProcess  # noqa: E402

from dlsched.service.gpu_binding.mutation import plan  # noqa: E402

RES_NS = "dlsched-hold"


def _pod(name: str, gpus: int, scheduler: str = "dlsched", node_selector: dict | None = None) -> dict:
    """A GPU pod; one of dlsched's in the form the webhook's patch gives it (see the module doc)."""
    body = gpu_pod(name, gpus, "gb")
    body["spec"]["schedulerName"] = scheduler
    if node_selector:
        body["spec"]["nodeSelector"] = node_selector
    for c in body["spec"]["containers"]:   # the API server's defaulting: requests = limits
        c["resources"]["requests"] = dict(c["resources"]["limits"])
    ops, _ = plan(body, "dlsched")
    return apply_patch(body, ops)


def _create(cp, body: dict) -> dict:
    status, out = cp.request("POST", "/api/v1/namespaces/default/pods", body)
    assert status == 201, out
    return out


def _get(cp, path: str) -> dict:
    status, out = cp.request("GET", path)
    assert status == 200, out
    return out


def _wait(cond, timeout: float, what: str):
    return poll(cond, timeout, 0.1, what)


def _reservations(cp) -> dict[str, dict]:
    items = _get(cp, f"/api/v1/namespaces/{RES_NS}/pods?labelSelector=dlsched.io%2Freservation%3Dgpu")["items"]
    return {p["metadata"]["name"]: p for p in items if not p["metadata"].get("deletionTimestamp")}


@pytest.fixture(scope="module")
def plane(shared, tmp_path_factory):
    reason = missing_reason(shared / "k8s")
    if reason:
        pytest.skip(f"no control plane: {reason}")
    cp = start_control_plane(shared / "k8s", "", audit=True)   # kube-scheduler alone
    svc = None
    try:
        add_gpu_node(cp, "gpu-0", 8, labels={"kubernetes.io/hostname": "gpu-0"})
        add_gpu_node(cp, "mig-0", 8, labels={"nvidia.com/mig.strategy": "single", "kubernetes.io/hostname": "mig-0"})
        status, out = cp.request("POST", "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace",
                                                                "metadata": {"name": RES_NS}})
        assert status == 201, out
        tmp = tmp_path_factory.mktemp("gpubind")
        svc = ServiceProcess(free_port(), cp.api_url, cp.token, f"sqlite:///{tmp / 'store.db'}", "fifo",
                             tmp / "dlsched.log",
                             extra=("--mode", "scheduler", "--eta-interval", "0", "--gpu-binding", "envvar-configmap",
                                    "--webhook-port", str(free_port()), "--reservation-namespace", RES_NS)).start()
        yield cp, svc
    finally:
        if svc is not None:
            svc.stop()
        cleanup(cp)


def test_the_api_server_calls_the_webhook_over_tls_and_another_schedulers_pod_is_untouched(plane):
    cp, svc = plane
    reg = _get(cp, "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/gpus.dlsched.io")
    assert reg["webhooks"][0]["clientConfig"]["url"].startswith("https://127.0.0.1:")
    assert reg["webhooks"][0]["clientConfig"]["caBundle"]
    mine = _create(cp, _pod("mut-a", 2, node_selector={"kubernetes.io/hostname": "nowhere"}))
    other = _create(cp, _pod("mut-b", 1, scheduler="default-scheduler",
                             node_selector={"kubernetes.io/hostname": "nowhere"}))
    c = mine["spec"]["containers"][0]
    assert "nvidia.com/gpu" not in (c["resources"].get("limits") or {})
    assert "nvidia.com/gpu" not in (c["resources"].get("requests") or {})
    ann = mine["metadata"]["annotations"]
    assert ann["dlsched.io/gpu-request"] == "2"
    assert c["envFrom"] == [{"configMapRef": {"name": ann["dlsched.io/gpu-configmap"], "optional": False}}]
    assert ann["dlsched.io/gpu-configmap"].startswith("dlsched-gpus-")
    o = other["spec"]["containers"][0]
    assert o["resources"]["limits"] == {"nvidia.com/gpu": "1"} and "envFrom" not in o
    assert "dlsched.io/gpu-configmap" not in (other["metadata"].get("annotations") or {})
    webhook = svc.get("/api/v1/state")["mode"]["gpu_binding"]["webhook"]
    assert webhook["passed"] >= 2 and webhook["registration"] == "created", webhook   # both pods reviewed
    for name in ("mut-a", "mut-b"):
        cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")


def test_configmap_before_binding_reservations_held_and_released(plane):
    cp, svc = plane
    pod = _create(cp, _pod("train", 3, node_selector={"kubernetes.io/hostname": "gpu-0"}))
    cm_name = pod["metadata"]["annotations"]["dlsched.io/gpu-configmap"]
    bound = _wait(lambda: (p := _get(cp, "/api/v1/namespaces/default/pods/train"))["spec"].get("nodeName") and p,
                  20, "train bound")
    assert bound["spec"]["nodeName"] == "gpu-0"
    gpus = bound["metadata"]["annotations"]["dlsched.io/gpus"]
    assert len(gpus.split(",")) == 3
    cm = _get(cp, f"/api/v1/namespaces/default/configmaps/{cm_name}")
    assert cm["data"] == {"NVIDIA_VISIBLE_DEVICES": gpus}
    assert cm["metadata"]["ownerReferences"][0]["uid"] == bound["metadata"]["uid"]
    held = _reservations(cp)
    assert sorted(p["metadata"]["annotations"]["dlsched.io/gpu"] for p in held.values()) == sorted(gpus.split(","))
    assert all(p["spec"]["nodeName"] == "gpu-0" for p in held.values())
    assert all(p["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"} for p in held.values())
    time.sleep(1.0)   # the audit log is written as requests finish
    order = [(e["verb"], (e.get("objectRef") or {}).get("resource"), (e.get("objectRef") or {}).get("name"),
              (e.get("objectRef") or {}).get("subresource")) for e in audit_writes(cp)
             if e.get("userAgent", "").startswith("dlsched") and e.get("responseStatus", {}).get("code", 0) < 300]
    cm_at = order.index(("create", "configmaps", cm_name, None))
    bind_at = order.index(("create", "pods", "train", "binding"))
    res_at = [i for i, w in enumerate(order) if w[:2] == ("create", "pods") and w[2] in held and w[3] is None]
    assert len(res_at) == 3 and max(res_at) < cm_at < bind_at, order
    # kube-scheduler counts the reservations: 8 GPUs no longer fit gpu-0 (the other node is MIG, 8 free);
    # pinned to gpu-0, 8 stay pending and 4 bind
    _create(cp, _pod("big", 8, scheduler="default-scheduler", node_selector={"kubernetes.io/hostname": "gpu-0"}))
    _create(cp, _pod("fits", 4, scheduler="default-scheduler", node_selector={"kubernetes.io/hostname": "gpu-0"}))
    _wait(lambda: _get(cp, "/api/v1/namespaces/default/pods/fits")["spec"].get("nodeName"), 20, "fits bound")
    # a later bind on gpu-0 sees the device-plugin pod there: the devices are unverified, and said so
    _create(cp, _pod("later", 1, node_selector={"kubernetes.io/hostname": "gpu-0"}))
    _wait(lambda: _get(cp, "/api/v1/namespaces/default/pods/later")["spec"].get("nodeName"), 20, "later bound")
    assert svc.get("/api/v1/state")["mode"]["gpu_binding"]["identity_unverified_nodes"] == {"gpu-0": 1}
    big = _get(cp, "/api/v1/namespaces/default/pods/big")
    assert not big["spec"].get("nodeName")
    cond = [c for c in big["status"].get("conditions") or [] if c["type"] == "PodScheduled"]
    assert cond and cond[0]["reason"] == "Unschedulable" and "nvidia.com/gpu" in cond[0]["message"], cond
    for name in ("train", "big", "fits", "later"):
        cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
    _wait(lambda: not _reservations(cp), 15, "reservations deleted")
    # no garbage collector runs here (no kube-controller-manager): dlsched deletes the ConfigMaps itself
    _wait(lambda: cp.request("GET", f"/api/v1/namespaces/default/configmaps/{cm_name}")[0] == 404, 15,
          "train's ConfigMap deleted")
    state = svc.get("/api/v1/state")["mode"]["gpu_binding"]
    assert state["reservations_created"] >= 4 and state["reservations_deleted"] >= 4 and state["reservations"] == 0
    assert state["configmaps_deleted"] >= 2 and state["configmaps"] == 0, state   # train's and later's


def test_a_node_whose_setup_cannot_bind_is_filtered_and_an_unmutated_pod_is_reported(plane):
    cp, svc = plane
    # pinned to the MIG node: the node checks leave it out (never nominated, never refused at bind)
    _create(cp, _pod("on-mig", 1, node_selector={"kubernetes.io/hostname": "mig-0"}))

    def unschedulable():
        conds = _get(cp, "/api/v1/namespaces/default/pods/on-mig")["status"].get("conditions") or []
        return [c for c in conds if c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"]
    cond = _wait(unschedulable, 20, "on-mig reported Unschedulable")[0]
    assert "1 node(s) cannot bind dlsched's GPU choice (MIG-partitioned GPUs)" in cond["message"], cond
    state = svc.get("/api/v1/state")["mode"]
    assert state["gpu_binding"]["binds_refused"] == 0 and state["gpu_unbindable_excluded"] >= 1, state
    assert list(state["gpu_binding"]["unbindable_nodes"]) == ["mig-0"]
    assert not _get(cp, "/api/v1/namespaces/default/pods/on-mig")["spec"].get("nodeName")
    cp.request("DELETE", "/api/v1/namespaces/default/pods/on-mig?gracePeriodSeconds=0")   # fifo: it heads the queue
    # an init container's GPUs: the webhook leaves the pod alone (a warning); it is bound, and reported
    body = _pod("unmutated", 1, node_selector={"kubernetes.io/hostname": "gpu-0"})
    body["spec"]["initContainers"] = [{"name": "init", "image": "example.invalid/init",
                                       "resources": {"limits": {"nvidia.com/gpu": "1"},
                                                     "requests": {"nvidia.com/gpu": "1"}}}]
    body["metadata"].pop("annotations", None)
    body["spec"]["containers"][0].pop("envFrom", None)
    body["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}}
    assert plan(body, "dlsched")[1].startswith("an init container requests")
    pod = _create(cp, body)
    _wait(lambda: _get(cp, "/api/v1/namespaces/default/pods/unmutated")["spec"].get("nodeName"), 20, "unmutated bound")
    rows = [r for r in svc.get("/api/v1/state")["mode"]["gpu_binding"]["not_bound"] if r["pod"] == "default/unmutated"]
    assert rows and "did not mutate" in rows[0]["reason"], rows
    events = _wait(lambda: [e for e in _get(cp, "/api/v1/namespaces/default/events")["items"]
                            if e["reason"] == "GpuChoiceNotBound"
                            and e["involvedObject"]["uid"] == pod["metadata"]["uid"]], 10, "event")
    assert events[0]["type"] == "Warning" and "did not mutate" in events[0]["message"]
    assert [r["pod"] for r in svc.get("/api/v1/dashboard")["gpu_binding"]] == ["default/unmutated"]
    with urllib.request.urlopen(svc.url + "/dashboard", timeout=10) as resp:
        page = resp.read().decode()
    assert 'id="gpu-binding"' in page and "default/unmutated" in page
    cp.request("DELETE", "/api/v1/namespaces/default/pods/unmutated?gracePeriodSeconds=0")
