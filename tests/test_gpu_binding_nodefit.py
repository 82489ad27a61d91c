"""``--gpu-binding envvar-configmap``'s node check (issue 34): a pod the webhook mutated passes
only nodes whose set-up binds its GPU choice, so a MIG or hardened node is filtered before the
policy sees it (never nominated, then refused at bind, again and again), with the reason in the
pod's Unschedulable and waiting messages, and counted."""

from __future__ import annotations

import pytest

pytest.importorskip("kubernetes")

from test_scheduler_mode import FakeApi, Raw, _service, _settle, node, pod  # noqa: E402

from dlsched.service import nodefit  # noqa: E402
from dlsched.service.gpu_binding.binding import GpuBinding  # noqa: E402

MUTATED = {"dlsched.io/gpu-configmap": "dlsched-gpus-1", "dlsched.io/gpu-request": "1"}
MIG = {"nvidia.com/mig.strategy": "single"}


def _mutated(uid: str, **spec) -> dict:
    """A pod in the form the webhook's patch gives it: no nvidia.com/gpu, the count in an annotation."""
    body = pod(uid, 0, **spec)
    body["metadata"]["annotations"] = dict(MUTATED)
    body["spec"]["containers"][0]["resources"] = {}
    return body


def test_the_check_keeps_a_mutated_pod_off_nodes_whose_setup_cannot_bind():
    nodes = [node("ok"), node("mig", labels=MIG), node("hard", labels={"dlsched.io/gpu-binding": "refused"}),
             node("cdi", labels={"dlsched.io/gpu-binding": "cdi"}),
             node("plug", labels={"dlsched.io/gpu-binding": "device-plugin"})]
    nodes[0]["status"]["allocatable"]["nvidia.com/mig-1g.5gb"] = "0"   # a MIG resource: detected without a label
    result = nodefit.feasible(_mutated("p"), nodes[1:], {}, gpu_binding=True)
    assert result.nodes == ["plug"]
    assert result.failed_checks == {"mig": ["gpu-binding"], "hard": ["gpu-binding"], "cdi": ["gpu-binding"]}
    assert result.message == (
        "1/4 nodes are available: 1 node(s) cannot bind dlsched's GPU choice (MIG-partitioned GPUs), "
        "1 node(s) cannot bind dlsched's GPU choice (dlsched.io/gpu-binding=cdi: CDI devices only), "
        "1 node(s) cannot bind dlsched's GPU choice (dlsched.io/gpu-binding=refused: NVIDIA_VISIBLE_DEVICES "
        "refused).")
    assert nodefit.feasible(_mutated("p"), nodes[:1], {}, gpu_binding=True).nodes == []
    # an unmutated pod, or no --gpu-binding: the set-up is not the node checks' business
    assert len(nodefit.feasible(pod("q", 0), nodes, {}, gpu_binding=True).nodes) == 5
    assert len(nodefit.feasible(_mutated("p"), nodes, {}, gpu_binding=False).nodes) == 5
    # a node that fails an earlier check is counted by that one (kube-scheduler's first failing check)
    result = nodefit.feasible(_mutated("p", nodeSelector={"zone": "x"}), nodes[1:2], {}, gpu_binding=True)
    assert result.failed_checks == {"mig": ["affinity", "gpu-binding"]}
    assert result.message == "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity."


class _Done(Raw):
    def read(self) -> bytes:
        return self.data


class _Api(FakeApi):
    """The scheduler-mode fake API plus what GpuBinding writes."""

    def create_namespaced_pod(self, namespace, body, _preload_content=False):
        self.writes.append(("reservation", body["metadata"]["name"]))
        return _Done({})

    def create_namespaced_config_map(self, namespace, body, _preload_content=False):
        self.writes.append(("configmap", body["metadata"]["name"], body["data"]["NVIDIA_VISIBLE_DEVICES"]))
        return _Done({})


def _with_binding(api):
    service, bridge = _service(api)
    binding = GpuBinding(bridge, service.core, bridge.nodes.get, "hold", "dlsched")
    bridge.gpu_binding = service.gpu_binding = binding
    return service, bridge, binding


def test_a_mig_node_is_never_nominated_the_pod_says_why_and_binds_where_the_choice_binds():
    import threading

    api = _Api([node("mig", labels=MIG)], [_mutated("p")])
    service, bridge, binding = _with_binding(api)
    threading.Thread(target=bridge._reporter, daemon=True).start()
    try:
        bridge.reconcile()
        service.core.run_pass()
        _settle(api, 2)
        (kind, name, cond), event = api.writes   # no reservation, no ConfigMap, no Binding: the Unschedulable report
        assert (kind, name, cond["reason"]) == ("status", "pod-p", "Unschedulable")
        assert cond["message"] == ("0/1 nodes are available: 1 node(s) cannot bind dlsched's GPU choice "
                                   "(MIG-partitioned GPUs).")
        assert event[2] == "FailedScheduling"
        assert binding.counts["binds_refused"] == 0 and bridge.counts["gpu_unbindable_excluded"] >= 1
        assert binding.state()["unbindable_nodes"] == {"mig": "node(s) cannot bind dlsched's GPU choice "
                                                              "(MIG-partitioned GPUs)"}
        bridge._node_event("ADDED", node("plain"))
        service.core.run_pass()
        _settle(api, 5)
        assert api.writes[2:] == [("reservation", "dlsched-hold-plain-0"), ("configmap", "dlsched-gpus-1", "0"),
                                  ("binding", "pod-p", "plain", {"dlsched.io/gpus": "0"})]
    finally:
        service.stop()


def test_a_waiting_mutated_pod_is_told_which_nodes_were_left_out():
    api = _Api([node("mig", labels=MIG), node("plain")], [_mutated("p")])
    service, bridge, _ = _with_binding(api)
    try:
        with bridge.cache_lock:
            bridge.nodes.update({"mig": api.nodes[0], "plain": api.nodes[1]})
            bridge.pending["p"] = api.pods[0]
        assert bridge.report_waiting("p", "waiting for GPUs: 1 node(s) pass")
        _, _, message, waiting = bridge._reports.get(0)
        assert waiting
        assert message == ("waiting for GPUs: 1 node(s) pass; 1 node(s) left out: their GPU set-up cannot bind "
                           "dlsched's GPU choice (mig)")
        assert bridge.last_report("p") == "waiting for GPUs: 1 node(s) pass"   # what the reporter compares
    finally:
        service.stop()
