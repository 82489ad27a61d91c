"""The message, condition and events in kube-scheduler v1.20's form; unsupported() lists."""

from datetime import UTC, datetime

from nodefit_builders import node, pod

from dlsched.service.nodefit import (
    condition_patch,
    failed_scheduling_event,
    feasible,
    fit_message,
    scheduled_event,
    unschedulable_condition,
    unsupported,
    unsupported_message,
)

T = datetime(2026, 11, 22, 14, 50, 43, 123456, tzinfo=UTC)


def test_captured_kube_scheduler_message_is_reproduced() -> None:
    # /work/shared/k8s/captured/events.txt: "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."
    nodes = [node(f"gpu-node-{c}") for c in "abc"]
    r = feasible(pod("train-16gpu-too-big", requests={"nvidia.com/gpu": "16"}), nodes, {})
    assert r.message == "0/3 nodes are available: 3 Insufficient nvidia.com/gpu."


def test_message_counts_first_failing_check_per_node_sorted_as_strings() -> None:
    taint = [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    nodes = [node("a", cpu="1"), node("b", taints=taint), node("c", taints=taint, cpu="1"),
             node("d", unschedulable=True, cpu="1")] + [node(f"e{i}", labels={"x": "y"}, cpu="1") for i in range(10)]
    p = pod("p", requests={"cpu": "2"})
    r = feasible(p, nodes, {})
    # "11 ..." sorts before "2 ...": Go's sort.Strings, as kube-scheduler
    assert r.message == ("0/14 nodes are available: 1 node(s) were unschedulable, 11 Insufficient cpu, "
                         "2 node(s) had taint {k: v}, that the pod didn't tolerate.")
    assert r.reasons["c"] == ["node(s) had taint {k: v}, that the pod didn't tolerate", "Insufficient cpu"]
    assert r.failed_checks["d"] == ["unschedulable", "resources"]


def test_message_with_no_nodes_and_with_some_nodes_left() -> None:
    assert feasible(pod("p"), [], {}).message == "no nodes available to schedule pods"
    assert fit_message(3, {"a": ["Too many pods"]}) == "2/3 nodes are available: 1 Too many pods."
    assert fit_message(2, {}) == "2/2 nodes are available."


def test_unschedulable_condition_and_its_patch() -> None:
    c = unschedulable_condition("0/3 nodes are available: 3 Insufficient cpu.", now=T)
    assert c == {"type": "PodScheduled", "status": "False", "lastProbeTime": None,
                 "lastTransitionTime": "2026-11-22T14:50:43Z", "reason": "Unschedulable",
                 "message": "0/3 nodes are available: 3 Insufficient cpu."}
    assert condition_patch(c) == {"status": {"conditions": [c]}}


def test_failed_scheduling_event_is_an_events_k8s_io_v1_event() -> None:
    e = failed_scheduling_event(pod("p"), "0/1 nodes are available: 1 Too many pods.", "dlsched", now=T,
                                instance="dlsched-host1")
    nanos = 1795359043123456000   # 2026-11-22T14:50:43.123456Z in Unix nanoseconds
    assert e == {
        "kind": "Event", "apiVersion": "events.k8s.io/v1",
        "metadata": {"name": f"p.{nanos:x}", "namespace": "default"},
        "eventTime": "2026-11-22T14:50:43.123456Z", "reportingController": "dlsched",
        "reportingInstance": "dlsched-host1", "action": "Scheduling", "reason": "FailedScheduling",
        "regarding": {"kind": "Pod", "namespace": "default", "name": "p", "uid": "uid-p", "apiVersion": "v1",
                      "resourceVersion": "42"},
        "note": "0/1 nodes are available: 1 Too many pods.", "type": "Warning"}
    assert failed_scheduling_event(pod("p"), "m", "dlsched")["reportingInstance"].startswith("dlsched-")


def test_scheduled_event_and_long_notes() -> None:
    e = scheduled_event(pod("p"), "gpu-node-a", "dlsched", now=T, instance="i")
    assert (e["reason"], e["type"], e["action"], e["note"]) == (
        "Scheduled", "Normal", "Binding", "Successfully assigned default/p to gpu-node-a")
    long = failed_scheduling_event(pod("p"), "é" * 2000, "dlsched", now=T, instance="i")["note"]
    assert len(long.encode()) <= 1024 and long.endswith("...")


def test_unsupported_names_each_unevaluated_input() -> None:
    assert unsupported(pod("p")) == []
    p = pod("p")
    p["spec"]["affinity"] = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [{}]},
                             "podAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{}]},
                             "nodeAffinity": {}}
    p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1}]
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}},
                            {"name": "cfg", "configMap": {"name": "m"}}, {"name": "d", "csi": {"driver": "x"}}, 7]
    out = unsupported(p)
    assert len(out) == 6
    assert out[0].startswith("inter-pod affinity (spec.affinity.podAffinity, preferred)")
    assert out[1].startswith("inter-pod anti-affinity (spec.affinity.podAntiAffinity, required)")
    assert out[2].startswith("topology spread constraints")
    assert "'data' uses a PersistentVolumeClaim" in out[3] and "'d' uses an inline CSI volume" in out[4]
    assert out[5] == "spec.volumes[3] is not an object: cannot tell whether it needs node checks"


def test_unsupported_on_hostile_pods() -> None:
    assert unsupported("x") == ["the pod is not a JSON object: nothing about it can be checked"]
    assert unsupported({}) == []
    assert unsupported({"spec": []}) == ["spec is not an object: nothing about the pod can be checked"]
    assert unsupported({"spec": {"volumes": "v"}}) == ["spec.volumes is not a list: cannot tell which volumes need "
                                                       "node checks"]


def test_unsupported_message_names_every_item_and_says_the_pod_waits() -> None:
    p = pod("p")
    p["spec"]["topologySpreadConstraints"] = [{"maxSkew": 1}]
    p["spec"]["volumes"] = [{"name": "data", "persistentVolumeClaim": {"claimName": "c"}}]
    m = unsupported_message(unsupported(p))
    assert m == ("dlsched does not evaluate what this pod asks for, so it is not placed: topology spread "
                 "constraints (spec.topologySpreadConstraints) are not evaluated; volume 'data' uses a "
                 "PersistentVolumeClaim (its volume's node affinity, binding and zone): not evaluated. "
                 "Remove it or use a scheduler that evaluates it.")
    assert unschedulable_condition(m, now=T)["reason"] == "Unschedulable"
