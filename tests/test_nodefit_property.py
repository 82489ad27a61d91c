"""Properties: a pod fits a node iff each rule, checked on its own, passes (and each rule agrees with a
plain oracle); hostile pods and nodes get reasons, never an exception."""

from __future__ import annotations

import copy

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from nodefit_builders import expr, node, pod, required

from dlsched.service.nodefit import NodeTable, feasible, unsupported

ZONES = ("a", "b", "c")
KEYS = ("dedicated", "gpu")
EFFECTS = ("NoSchedule", "NoExecute", "PreferNoSchedule")


@st.composite
def cases(draw: st.DrawFn) -> tuple[dict, dict, list[dict], dict]:
    """(pod, node, bound pods, the drawn parameters the oracle reads)."""
    prm = {
        "cpu": draw(st.integers(0, 4000)), "gpu": draw(st.integers(0, 8)),
        "node_cpu": draw(st.integers(0, 4000)), "node_gpu": draw(st.integers(0, 8)), "max_pods": draw(st.integers(0, 3)),
        "bound": draw(st.lists(st.tuples(st.integers(0, 2000), st.integers(0, 4),
                                         st.sampled_from(["Running", "Pending", "Succeeded", "Failed"])), max_size=3)),
        "zone": draw(st.sampled_from(ZONES)), "sel": draw(st.sampled_from((None, *ZONES))),
        "op": draw(st.sampled_from(("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt", None))),
        "val": draw(st.sampled_from(ZONES)), "absent": draw(st.booleans()), "gen": draw(st.integers(0, 9)), "num": draw(st.integers(0, 9)),
        "taints": draw(st.lists(st.tuples(st.sampled_from(KEYS), st.sampled_from(("x", "y")),
                                          st.sampled_from(EFFECTS)), max_size=2, unique_by=lambda t: (t[0], t[2]))),
        "tols": draw(st.lists(st.tuples(st.sampled_from(("", *KEYS)), st.sampled_from(("Equal", "Exists")),
                                        st.sampled_from(("x", "y")), st.sampled_from(("", *EFFECTS))), max_size=2)),
        "cordon": draw(st.booleans()), "ready": draw(st.sampled_from((None, "True", "False", "Unknown"))),
    }
    affinity = None
    if prm["op"] in ("In", "NotIn"):
        affinity = required({"matchExpressions": [expr("ssd" if prm["absent"] else "zone", prm["op"], prm["val"])]})
    elif prm["op"] in ("Exists", "DoesNotExist"):
        affinity = required({"matchExpressions": [expr("zone" if prm["val"] == "a" else "ssd", prm["op"])]})
    elif prm["op"] in ("Gt", "Lt"):
        affinity = required({"matchExpressions": [expr("gen", prm["op"], str(prm["num"]))]})
    tols = [{"key": k, "operator": o, **({"value": v} if o == "Equal" else {}), **({"effect": e} if e else {})}
            for k, o, v, e in prm["tols"] if k or o == "Exists"]
    prm["tols"] = tols
    p = pod("p", requests={"cpu": f"{prm['cpu']}m", "nvidia.com/gpu": str(prm["gpu"])},
            selector={"zone": prm["sel"]} if prm["sel"] else None, affinity=affinity, tolerations=tols or None)
    n = node("n", cpu=f"{prm['node_cpu']}m", gpus=str(prm["node_gpu"]), pods=str(prm["max_pods"]),
             labels={"zone": prm["zone"], "gen": str(prm["gen"])}, unschedulable=prm["cordon"], ready=prm["ready"],
             taints=[{"key": k, "value": v, "effect": e} for k, v, e in prm["taints"]] or None)
    bound = [pod(f"b{i}", requests={"cpu": f"{c}m", "nvidia.com/gpu": str(g)}, node_name="n", phase=ph)
             for i, (c, g, ph) in enumerate(prm["bound"])]
    return p, n, bound, prm


def _tolerates(tols: list[dict], key: str, value: str, effect: str) -> bool:
    return any((not t.get("effect") or t["effect"] == effect) and (not t.get("key") or t["key"] == key)
               and (t["operator"] == "Exists" or t.get("value", "") == value) for t in tols)


def oracle(prm: dict) -> dict[str, bool]:
    """Each rule, written out plainly for the drawn domain."""
    live = [(c, g) for c, g, ph in prm["bound"] if ph not in ("Succeeded", "Failed")]
    # the pod always lists nvidia.com/gpu (even "0"), so every resource is compared
    resources = (len(live) + 1 <= prm["max_pods"] and prm["cpu"] + sum(c for c, _ in live) <= prm["node_cpu"]
                 and prm["gpu"] + sum(g for _, g in live) <= prm["node_gpu"])
    labels = {"zone": prm["zone"], "gen": prm["gen"]}
    op = prm["op"]
    here = not prm["absent"]     # In / NotIn on the zone label, or on "ssd", which no node has
    aff = {None: True, "In": here and labels["zone"] == prm["val"], "NotIn": not here or labels["zone"] != prm["val"],
           "Exists": prm["val"] == "a", "DoesNotExist": prm["val"] != "a",
           "Gt": prm["gen"] > prm["num"], "Lt": prm["gen"] < prm["num"]}[op]
    aff = aff and (prm["sel"] is None or prm["sel"] == prm["zone"])
    taints = [(k, v, e) for k, v, e in prm["taints"] if e != "PreferNoSchedule"]
    if prm["ready"] in ("False", "Unknown"):
        key = "node.kubernetes.io/not-ready" if prm["ready"] == "False" else "node.kubernetes.io/unreachable"
        taints += [(key, "", "NoSchedule"), (key, "", "NoExecute")]
    return {"unschedulable": not prm["cordon"] or _tolerates(prm["tols"], "node.kubernetes.io/unschedulable", "",
                                                             "NoSchedule"),
            "resources": resources, "affinity": aff,
            "taints": all(_tolerates(prm["tols"], *t) for t in taints)}


def only(rule: str, p: dict, n: dict, bound: list[dict]) -> tuple[dict, dict, list[dict]]:
    """The case with every input but ``rule``'s taken out."""
    p, n, bound = copy.deepcopy(p), copy.deepcopy(n), copy.deepcopy(bound) if rule == "resources" else []
    if rule != "resources":
        p["spec"]["containers"][0]["resources"]["requests"] = {}
        n["status"]["allocatable"]["pods"] = "110"
    if rule != "affinity":
        p["spec"].pop("nodeSelector", None)
        p["spec"].pop("affinity", None)
    if rule not in ("taints", "unschedulable"):
        p["spec"].pop("tolerations", None)
    if rule != "taints":
        n["spec"].pop("taints", None)
        n["status"].pop("conditions", None)
    if rule != "unschedulable":
        n["spec"].pop("unschedulable", None)
    return p, n, bound


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_pod_fits_iff_each_rule_passes(case: tuple) -> None:
    p, n, bound, prm = case
    r = feasible(p, [n], {"n": bound})
    expect = oracle(prm)
    alone = {}
    for rule in expect:
        q, m, b = only(rule, p, n, bound)
        alone[rule] = bool(feasible(q, [m], {"n": b}).nodes)
    assert alone == expect
    assert bool(r.nodes) == all(expect.values())
    assert r.failed_checks.get("n", []) == [c for c in ("unschedulable", "taints", "affinity", "resources")
                                            if not expect[c]]
    assert r.message.startswith("1/1" if r.nodes else "0/1 nodes are available: 1 ")


JSON = st.recursive(st.none() | st.booleans() | st.integers(-10, 10**20) | st.floats() | st.text(max_size=8),
                    lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                    max_leaves=8)


def _paths(obj: object, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(obj, dict):
        for k, v in obj.items():
            out += _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out += _paths(v, (*prefix, i))
    return out


def _put(obj: object, path: tuple, value: object) -> object:
    if not path:
        return value
    target = obj
    for step in path[:-1]:
        target = target[step]
    target[path[-1]] = value
    return obj


def _rich_pod() -> dict:
    aff = required({"matchExpressions": [expr("zone", "In", "a")],
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n"]}]})
    aff["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"] = [
        {"weight": 5, "preference": {"matchExpressions": [expr("gen", "Gt", "1")]}}]
    return pod("p", requests={"cpu": "1", "memory": "1Gi", "nvidia.com/gpu": "1"}, init=[{"cpu": "2"}],
               overhead={"cpu": "10m"}, selector={"zone": "a"}, affinity=aff,
               tolerations=[{"key": "k", "operator": "Exists"}], ports=[{"containerPort": 1, "hostPort": 80}])


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_hostile_pods_and_nodes_get_reasons_never_exceptions(data: st.DataObject) -> None:
    p = _rich_pod()
    n = node("n", labels={"zone": "a", "gen": "3"}, taints=[{"key": "k", "value": "v", "effect": "NoSchedule"}],
             ready="True")
    bound = [pod("b", requests={"cpu": "1"}, node_name="n", phase="Running", ports=[{"containerPort": 1,
                                                                                      "hostPort": 81}])]
    which = data.draw(st.sampled_from(("pod", "node", "bound")))
    target = {"pod": p, "node": n, "bound": bound[0]}[which]
    path = data.draw(st.sampled_from(_paths(target)))
    value = data.draw(JSON)
    mutated = _put(target, path, value)
    p, n, bound = (mutated if which == "pod" else p, mutated if which == "node" else n,
                   [mutated] if which == "bound" else bound)
    r = feasible(p, [n, node("spare")], {"n": bound})
    meta = mutated.get("metadata") if which == "node" and isinstance(mutated, dict) else None
    # the first node's name as mutated: a renamed node keeps its new name; without one it is nodes[0]
    name = meta["name"] if isinstance(meta, dict) and isinstance(meta.get("name"), str) and meta["name"] else \
        ("n" if which != "node" else "nodes[0]")
    assert set(r.nodes) | set(r.reasons) <= {"n", "spare", "nodes[0]", name}
    assert all(r.reasons[x] and all(isinstance(s, str) for s in r.reasons[x]) for x in r.reasons)
    assert isinstance(r.message, str) and r.message
    assert all(isinstance(s, str) for s in unsupported(p))
    if which == "node" and name not in r.nodes:
        assert name in r.reasons or "nodes[0]" in r.reasons


def test_hostile_examples_name_the_field() -> None:
    bad_cpu = pod("p", requests={"cpu": "lots"})
    r = feasible(bad_cpu, [node("n")], {})
    assert r.reasons["n"] == ["pod spec is invalid (spec.containers[0].resources.requests.cpu: 'lots' is not a "
                              "quantity)"]
    assert r.message == ("0/1 nodes are available: 1 pod spec is invalid (spec.containers[0].resources.requests.cpu: "
                         "'lots' is not a quantity).")
    n = node("n", memory="1.2.3Gi")
    assert feasible(pod("p"), [n], {}).reasons["n"] == [
        "node data unreadable (status.allocatable.memory: '1.2.3Gi' is not a quantity)"]
    broken = pod("b", requests={"cpu": "-1"}, node_name="n")
    assert feasible(pod("p"), [node("n")], {"n": [broken]}).reasons["n"] == [
        "node data unreadable (pods[0] spec.containers[0].resources.requests.cpu: '-1' is negative)"]
    assert feasible("x", [node("n")], {}).reasons["n"] == ["pod spec is invalid (pod is not an object)"]
    assert feasible(pod("p"), ["junk", {"metadata": {}}], {}).reasons == {
        "nodes[0]": ["node data unreadable (nodes[0] is not an object)"],
        "nodes[1]": ["node data unreadable (metadata.name is missing)"]}
    r = feasible(pod("p"), "junk", "junk")  # type: ignore[arg-type]
    assert r.message == "no nodes available to schedule pods" and r.notes == [
        "the node list is a str, not a list: no node is checked",
        "pods_by_node is a str, not a dict: no bound pod is counted"]
    t = NodeTable([node("n"), node("n")], {})
    assert len(t.entries) == 1 and t.feasible(pod("p")).notes == [
        "node 'n' is listed twice: the later entry is left out"]
