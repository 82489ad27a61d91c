"""nodefit against the real kube-scheduler v1.20.2 (../shared/k8s): the same pods and nodes, the same
words. Every pod here fails every node on kube-scheduler's own checks (so its extender is never
called), and the message it writes into the pod's PodScheduled condition is the one
``feasible()`` computes from the API server's JSON of the nodes and their pods; the condition and
the FailedScheduling event it wrote have the shape ``unschedulable_condition`` and
``failed_scheduling_event`` build.

NotReady nodes are not compared: this control plane has no node lifecycle controller (and
``TaintNodesByCondition`` off), so kube-scheduler here never sees the not-ready taint.
"""

from __future__ import annotations

import re

from support.polling import poll

from dlsched.service.nodefit import (
    condition_patch,
    failed_scheduling_event,
    feasible,
    group_by_node,
    unschedulable_condition,
)

TAINT = [{"key": "dedicated", "value": "ml", "effect": "NoSchedule"}]
NODES = [  # name, allocatable overrides, labels, spec
    ("cpu-small", {"cpu": "2"}, {"zone": "a", "gen": "3"}, {}),
    ("tainted", {}, {"zone": "b", "gen": "5"}, {"taints": TAINT}),
    ("cordoned", {}, {"zone": "b", "gen": "7"}, {"unschedulable": True}),
    ("no-pods", {"pods": "0"}, {"zone": "c", "gen": "9"}, {}),
    ("busy", {}, {"zone": "c", "gen": "1"}, {}),
]


def _pod(name: str, requests: dict, **spec) -> dict:
    limits = {k: v for k, v in requests.items() if "/" in k}   # extended resources: limit = request
    container = {"name": "main", "image": "example.invalid/x", "resources": {"requests": requests, "limits": limits}}
    if "ports" in spec:
        container["ports"] = spec.pop("ports")
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
            "spec": {"containers": [container], **spec}}


def _terms(*terms: dict) -> dict:
    return {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": list(terms)}}}


PODS = [
    _pod("sel-b", {"cpu": "4"}, nodeSelector={"zone": "b"}),
    _pod("gpu-9", {"nvidia.com/gpu": "9"}, tolerations=[{"operator": "Exists"}]),
    _pod("ports-affinity", {"cpu": "100m"}, ports=[{"containerPort": 80, "hostPort": 8080}],
         affinity=_terms({"matchExpressions": [{"key": "gen", "operator": "Gt", "values": ["4"]},
                                               {"key": "zone", "operator": "NotIn", "values": ["b"]}]},
                         {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["busy"]}]})),
    _pod("init-memory", {"memory": "600Gi"}, initContainers=[
        {"name": "init", "image": "example.invalid/x", "resources": {"requests": {"cpu": "3"}}}]),
    _pod("lt-exists", {"cpu": "5"}, affinity=_terms({"matchExpressions": [
        {"key": "gen", "operator": "Lt", "values": ["2"]}, {"key": "zone", "operator": "Exists"},
        {"key": "ssd", "operator": "DoesNotExist"}]})),
    _pod("storage-wrong-toleration", {"ephemeral-storage": "1Gi"},
         tolerations=[{"key": "dedicated", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}]),
]


def _scheduled_condition(cp, name: str) -> dict | None:
    _, p = cp.request("GET", f"/api/v1/namespaces/default/pods/{name}")
    return next((c for c in p.get("status", {}).get("conditions", []) if c.get("type") == "PodScheduled"), None)


def test_messages_condition_and_event_match_kube_scheduler(shared) -> None:
    from support.control_plane import extender_control_plane

    with extender_control_plane(shared) as (cp, _port):
        for name, alloc, labels, spec in NODES:
            res = {"cpu": "64", "memory": "512Gi", "pods": "110", "nvidia.com/gpu": "8", **alloc}
            status, body = cp.request("POST", "/api/v1/nodes", {
                "apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": labels}, "spec": spec,
                "status": {"capacity": res, "allocatable": res}})
            assert status == 201, body
        holder = _pod("holder", {"cpu": "60"}, nodeName="busy", ports=[{"containerPort": 80, "hostPort": 8080}])
        status, body = cp.request("POST", "/api/v1/namespaces/default/pods", holder)
        assert status == 201, body
        for p in PODS:
            status, body = cp.request("POST", "/api/v1/namespaces/default/pods", p)
            assert status == 201, (p["metadata"]["name"], body.get("message"))
        for p in PODS:
            name = p["metadata"]["name"]
            cond = poll(lambda n=name: _scheduled_condition(cp, n), timeout=90, step=0.5)
            _, nodes = cp.request("GET", "/api/v1/nodes")
            _, pods = cp.request("GET", "/api/v1/namespaces/default/pods")
            by_node = group_by_node(pods["items"])
            me = next(q for q in pods["items"] if q["metadata"]["name"] == name)
            ours = feasible(me, nodes["items"], by_node)
            assert ours.nodes == [], name
            assert cond["message"] == ours.message, name
            built = unschedulable_condition(ours.message)
            assert set(cond) == set(built) and {k: cond[k] for k in ("type", "status", "reason")} == {
                k: built[k] for k in ("type", "status", "reason")}
            assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", cond["lastTransitionTime"])
        # one known message spelled out: per node the first failing check, counted and sorted as strings
        _, sel = cp.request("GET", "/api/v1/namespaces/default/pods/sel-b")
        assert _scheduled_condition(cp, "sel-b")["message"] == (
            "0/5 nodes are available: 1 node(s) had taint {dedicated: ml}, that the pod didn't tolerate, "
            "1 node(s) were unschedulable, 3 node(s) didn't match Pod's node affinity.")
        # the FailedScheduling event, as events.k8s.io/v1 shows it
        _, events = cp.request("GET", "/apis/events.k8s.io/v1/namespaces/default/events")
        real = next(e for e in events["items"] if e["regarding"]["name"] == "sel-b" and e["reason"] == "FailedScheduling")
        mine = failed_scheduling_event(sel, real["note"], "default-scheduler")
        assert (events["kind"], events["apiVersion"]) == (f"{mine['kind']}List", mine["apiVersion"])
        for key in ("reportingController", "action", "reason", "type", "note"):
            assert real.get(key) == mine[key], (key, real.get(key), mine[key])
        assert real["reportingInstance"].startswith("default-scheduler-")
        assert {k: real["regarding"][k] for k in ("kind", "namespace", "name", "uid", "apiVersion")} == {
            k: mine["regarding"][k] for k in ("kind", "namespace", "name", "uid", "apiVersion")}
        assert re.fullmatch(r"sel-b\.[0-9a-f]+", real["metadata"]["name"])
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", real["eventTime"])
        assert set(mine) - {"kind", "apiVersion"} <= set(real)
        _write_as_dlsched(cp)
        print({p["metadata"]["name"]: _scheduled_condition(cp, p["metadata"]["name"])["message"] for p in PODS})
        print(real)



def _write_as_dlsched(cp) -> None:
    """The bodies dlsched writes for a pod of its own that fits nowhere: the v1.20 API server accepts
    the condition patch and the event, and shows them where ``kubectl describe pod`` reads them."""
    p = _pod("ours", {"nvidia.com/gpu": "99"}, schedulerName="dlsched")
    status, created = cp.request("POST", "/api/v1/namespaces/default/pods", p)
    assert status == 201, created
    _, nodes = cp.request("GET", "/api/v1/nodes")
    _, pods = cp.request("GET", "/api/v1/namespaces/default/pods")
    r = feasible(created, nodes["items"], group_by_node(pods["items"]))
    assert r.nodes == [] and r.message == (
        "0/5 nodes are available: 1 Too many pods, 1 node(s) had taint {dedicated: ml}, that the pod didn't "
        "tolerate, 1 node(s) were unschedulable, 3 Insufficient nvidia.com/gpu.")
    status, body = cp.request("PATCH", "/api/v1/namespaces/default/pods/ours/status",
                              condition_patch(unschedulable_condition(r.message)),
                              content_type="application/strategic-merge-patch+json")
    assert status == 200, body
    assert _scheduled_condition(cp, "ours")["message"] == r.message
    status, body = cp.request("POST", "/apis/events.k8s.io/v1/namespaces/default/events",
                              failed_scheduling_event(created, r.message, "dlsched"))
    assert status == 201, body
    _, core = cp.request("GET", "/api/v1/namespaces/default/events")
    ev = next(e for e in core["items"] if e["involvedObject"]["name"] == "ours")
    assert (ev["reason"], ev["type"], ev["message"], ev["reportingComponent"], ev["involvedObject"]["uid"]) == (
        "FailedScheduling", "Warning", r.message, "dlsched", created["metadata"]["uid"])
