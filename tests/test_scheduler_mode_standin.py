"""The stand-in for ``dlsched.service.nodefit`` (scheduler_mode/nodefit_standin.py) and the GPU
request left to the kernel. Delete this file with the stand-in once service/nodefit is merged."""

from __future__ import annotations

from test_scheduler_mode import node, pod

from dlsched.service.scheduler_mode import fit, nodefit_standin


def test_the_stand_in_rejects_each_node_for_its_reason_and_sums_them_up():
    nodes = [node("cordoned", unschedulable=True),
             node("tainted", taints=[{"key": "gpu", "value": "a100", "effect": "NoSchedule"}]),
             node("labelled", labels={"zone": "x"}),
             node("small", cpu="2"),
             {**node("down"), "status": {**node("down")["status"],
                                         "conditions": [{"type": "Ready", "status": "False"}]}}]
    by_node = {"small": [pod("running", cpu="1500m", node_name="small")]}
    result = nodefit_standin.feasible(pod("p", cpu="1"), nodes, by_node)
    assert result.nodes == ["labelled"]
    assert result.reasons == {"cordoned": "node(s) were unschedulable",
                              "tainted": "node(s) had taint that the pod didn't tolerate",
                              "small": "Insufficient cpu", "down": "node(s) were not ready"}
    assert result.message == ""
    tolerant = pod("t", cpu="500m",
                   tolerations=[{"key": "gpu", "operator": "Equal", "value": "a100", "effect": "NoSchedule"}])
    got = nodefit_standin.feasible(tolerant, nodes, by_node)
    assert got.nodes == ["tainted", "labelled", "small"]   # half a cpu is left on "small"
    none = nodefit_standin.feasible(pod("n", nodeSelector={"zone": "nowhere"}), nodes[:3], {})
    assert none.nodes == [] and none.message == ("0/3 nodes are available: 2 node(s) didn't match Pod's node affinity, "
                                                 "1 node(s) were unschedulable.")


def test_gpus_are_left_to_the_kernel_and_unsupported_terms_are_named():
    full = node("n", gpus=1)
    holder = pod("h", gpus=1, node_name="n")
    # the device plugin's count says no room; the kernel (which may share GPUs) decides that
    assert nodefit_standin.feasible(pod("p"), [full], {"n": [holder]}).nodes == []
    assert fit.feasible(pod("p"), [full], {"n": [holder]}).nodes == ["n"]
    assert fit.without_gpus(pod("p", cpu="2"))["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
    odd = pod("o", affinity={"podAntiAffinity": {"x": 1}}, topologySpreadConstraints=[{"maxSkew": 1}])
    assert nodefit_standin.unsupported(odd) == ["inter-pod anti-affinity", "topology spread constraints"]
    assert len(fit.unsupported(odd)) == 2   # whichever checks run, both are named
    cond = nodefit_standin.unschedulable_condition("0/3 nodes are available")
    assert (cond["type"], cond["status"], cond["reason"]) == ("PodScheduled", "False", "Unschedulable")
    event = nodefit_standin.failed_scheduling_event(pod("p"), "why", "dlsched")
    assert (event["reason"], event["type"], event["source"], event["involvedObject"]["uid"]) == \
        ("FailedScheduling", "Warning", {"component": "dlsched"}, "p")
