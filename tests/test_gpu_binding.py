"""The GPU-binding webhook's patch, the ConfigMap, reservation pods and node set-ups, in process
(service/gpu_binding/; the real API server's side is tests/test_gpu_binding_k8s.py)."""

from __future__ import annotations

import base64
import json

import pytest
from support.json_patch import apply_patch

from dlsched.service.gpu_binding import setups
from dlsched.service.gpu_binding.configmap import configmap_body
from dlsched.service.gpu_binding.mutation import plan, review_response
from dlsched.service.gpu_binding.reservations import is_reservation, reservation_name, reservation_pod
from dlsched.service.gpu_binding.setup import GpuBindingOptions
from dlsched.service.pods import pod_facts


def _pod(scheduler: str = "dlsched", gpus: int = 2, annotations: dict | None = None) -> dict:
    lim = {"nvidia.com/gpu": str(gpus), "cpu": "4"}
    meta: dict = {"name": "p", "namespace": "ns", "uid": "u1"}
    if annotations is not None:
        meta["annotations"] = annotations
    return {"metadata": meta, "spec": {"schedulerName": scheduler, "containers": [
        {"name": "a", "resources": {"limits": dict(lim), "requests": dict(lim)}},
        {"name": "side", "resources": {}, "envFrom": [{"secretRef": {"name": "s"}}]}]}}


def test_the_patch_moves_the_gpu_request_and_adds_the_configmap_reference():
    ops, why = plan(_pod(annotations={"keep": "1"}), "dlsched")
    out = apply_patch(_pod(annotations={"keep": "1"}), ops)
    a, side = out["spec"]["containers"]
    assert a["resources"] == {"limits": {"cpu": "4"}, "requests": {"cpu": "4"}}
    name = out["metadata"]["annotations"]["dlsched.io/gpu-configmap"]
    assert why == "" and name.startswith("dlsched-gpus-") and len(name) == len("dlsched-gpus-") + 16
    assert a["envFrom"] == [{"configMapRef": {"name": name, "optional": False}}]
    assert side == _pod()["spec"]["containers"][1]          # requests no GPU: untouched
    assert out["metadata"]["annotations"]["keep"] == "1" and out["metadata"]["annotations"]["dlsched.io/gpu-request"] == "2"
    facts = pod_facts(out)                                   # the service still sees 2 GPUs
    assert facts.gpus == 2
    # an existing envFrom list is appended to, a pod without annotations gets the map
    pod = _pod()
    pod["spec"]["containers"][0]["envFrom"] = [{"secretRef": {"name": "x"}}]
    out = apply_patch(pod, plan(pod, "dlsched")[0])
    assert [list(e) for e in out["spec"]["containers"][0]["envFrom"]] == [["secretRef"], ["configMapRef"]]
    assert plan(out, "dlsched") == ([], "")                  # mutated already


@pytest.mark.parametrize("pod", [_pod(scheduler="default-scheduler"), _pod(gpus=0)])
def test_other_schedulers_pods_and_pods_without_gpus_are_left_alone(pod):
    assert plan(pod, "dlsched") == ([], "")
    review = {"request": {"uid": "r1", "operation": "CREATE", "kind": {"kind": "Pod"}, "object": pod}}
    body, outcome = review_response(review, "dlsched")
    assert outcome == "passed" and body["response"] == {"uid": "r1", "allowed": True}


def test_a_pod_the_webhook_cannot_mutate_safely_gets_a_warning():
    pod = _pod()
    pod["spec"]["initContainers"] = [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
    body, outcome = review_response({"request": {"uid": "r", "operation": "CREATE", "kind": {"kind": "Pod"},
                                                 "object": pod}}, "dlsched")
    assert outcome.startswith("left: an init container") and "patch" not in body["response"]
    assert body["response"]["warnings"][0].startswith("dlsched: an init container")


def test_the_review_carries_the_patch_base64_encoded():
    body, outcome = review_response({"request": {"uid": "r", "operation": "CREATE", "kind": {"kind": "Pod"},
                                                 "object": _pod()}}, "dlsched")
    ops = json.loads(base64.b64decode(body["response"]["patch"]))
    assert outcome == "mutated" and body["response"]["patchType"] == "JSONPatch"
    assert ops[0] == {"op": "remove", "path": "/spec/containers/0/resources/limits/nvidia.com~1gpu"}


def test_configmap_and_reservation_bodies():
    cm = configmap_body("ns", "dlsched-gpus-1", "p", "u1", "n1", [3, 1])
    assert cm["data"] == {"NVIDIA_VISIBLE_DEVICES": "3,1"}
    assert cm["metadata"]["ownerReferences"] == [{"apiVersion": "v1", "kind": "Pod", "name": "p", "uid": "u1"}]
    res = reservation_pod("dlsched", "node-a", 5, "dlsched")
    assert res["metadata"]["name"] == "dlsched-hold-node-a-5" and res["spec"]["nodeName"] == "node-a"
    assert res["spec"]["containers"][0]["resources"]["requests"] == {"nvidia.com/gpu": "1"}
    assert is_reservation(res["metadata"]["name"], res["metadata"]["labels"])
    assert plan(res, "dlsched") == ([], "")                 # the webhook never takes a reservation's request
    long = reservation_name("Node." + "x" * 80, 7)
    assert len(long) <= 63 and long.endswith("-7") and long != reservation_name("Node." + "x" * 81, 7)


@pytest.mark.parametrize(("labels", "alloc", "word"), [
    ({}, {}, ""), ({"dlsched.io/gpu-binding": "device-plugin"}, {}, ""),
    ({"nvidia.com/mig.strategy": "mixed"}, {}, "MIG"), ({}, {"nvidia.com/mig-1g.5gb": "7"}, "MIG"),
    ({"dlsched.io/gpu-binding": "refused"}, {}, "refuses"), ({"dlsched.io/gpu-binding": "cdi"}, {}, "CDI"),
    ({"dlsched.io/gpu-binding": "odd"}, {}, "none of")])
def test_node_setups(labels, alloc, word):
    why = setups.unbindable({"metadata": {"labels": labels}, "status": {"allocatable": alloc}})
    assert (word in why) if word else why == ""


def test_options_are_checked():
    GpuBindingOptions().check("extender")
    with pytest.raises(ValueError, match="needs --mode scheduler"):
        GpuBindingOptions("envvar-configmap").check("extender")
    with pytest.raises(ValueError, match="--gpu-binding: 'x'"):
        GpuBindingOptions("x").check("scheduler")
    with pytest.raises(ValueError, match="https://"):
        GpuBindingOptions("envvar-configmap", webhook_url="http://a").check("scheduler")


class _Resp:
    def read(self) -> bytes:
        return b"{}"


class _FakeApi:
    """The calls GpuBinding makes, recorded in order (ApiException 409 for a second create)."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.pods: set[str] = set()
        self.fail_configmap = False
        self.configmaps: list[dict] = []   # what list_config_map_for_all_namespaces answers

    def create_namespaced_pod(self, ns, body, **_):
        from kubernetes.client.exceptions import ApiException

        name = body["metadata"]["name"]
        self.calls.append(("create pod", name))
        if name in self.pods:
            raise ApiException(status=409, reason="AlreadyExists")
        self.pods.add(name)
        return _Resp()

    def delete_namespaced_pod(self, name, ns, **_):
        self.calls.append(("delete pod", name))
        self.pods.discard(name)
        return _Resp()

    def create_namespaced_config_map(self, ns, body, **_):
        if self.fail_configmap:
            raise RuntimeError("API server away")
        self.calls.append(("create configmap", body["metadata"]["name"], body["data"]["NVIDIA_VISIBLE_DEVICES"]))
        return _Resp()

    def create_namespaced_event(self, ns, body, **_):
        self.calls.append(("event", body["reason"], body["involvedObject"]["name"]))
        return _Resp()

    def delete_namespaced_config_map(self, name, ns, **_):
        self.calls.append(("delete configmap", f"{ns}/{name}"))
        return _Resp()

    def list_namespaced_pod(self, ns, **_):
        return _Json({"items": []})

    def list_config_map_for_all_namespaces(self, label_selector, **_):
        assert label_selector == "app.kubernetes.io/managed-by=dlsched,dlsched.io/gpu-binding=envvar"
        return _Json({"items": self.configmaps})


class _Json(_Resp):
    def __init__(self, obj: dict) -> None:
        self.data = json.dumps(obj).encode()

    def read(self) -> bytes:
        return self.data

    def release_conn(self) -> None:
        pass


class _Job:
    placement = ("n1",)


class _Core:
    def __init__(self) -> None:
        import threading

        self.lock = threading.Lock()
        self.jobs: dict = {}
        self.pods: dict = {}


def _binding():
    from types import SimpleNamespace

    from dlsched.service.gpu_binding.binding import GpuBinding

    api, core = _FakeApi(), _Core()
    nodes = {"n1": {"metadata": {"labels": {}}}, "mig": {"metadata": {"labels": {"nvidia.com/mig.strategy": "single"}}}}
    return GpuBinding(SimpleNamespace(api=api), core, nodes.get, "hold", "dlsched"), api, core


def _seen(core, uid: str, mutated: bool = True) -> None:
    from types import SimpleNamespace

    core.pods[uid] = SimpleNamespace(annotations={"dlsched.io/gpu-configmap": f"cm-{uid}"} if mutated else {})
    core.jobs[uid] = _Job()


def test_shared_gpus_get_one_reservation_kept_until_the_last_holder_ends():
    gb, api, core = _binding()
    _seen(core, "a")
    _seen(core, "b")
    assert gb.before_binding("ns", "a", "a", "n1", [0, 1]) == ""
    assert gb.before_binding("ns", "b", "b", "n1", [1]) == ""    # shares GPU 1 with a
    assert api.calls == [("create pod", "dlsched-hold-n1-0"), ("create pod", "dlsched-hold-n1-1"),
                         ("create configmap", "cm-a", "0,1"), ("create configmap", "cm-b", "1")]
    del core.jobs["a"]                                           # a ended: GPU 0 is free, GPU 1 still b's
    assert gb.keep() == 1 and api.calls[-1] == ("delete pod", "dlsched-hold-n1-0")
    del core.jobs["b"]
    assert gb.keep() == 1 and api.calls[-1] == ("delete pod", "dlsched-hold-n1-1")
    assert gb.keep() == 0 and gb.state()["reservations"] == 0


def test_a_failed_write_fails_the_bind_and_a_failed_binding_holds_nothing():
    gb, api, core = _binding()
    _seen(core, "a")
    api.fail_configmap = True
    assert gb.before_binding("ns", "a", "a", "n1", [2]).startswith("GPU binding failed before the Binding")
    assert gb.keep() == 1                                        # its reservation goes
    api.fail_configmap = False
    assert gb.before_binding("ns", "a", "a", "n1", [2]) == ""
    gb.after_binding("a", "API server refused the bind (409)")
    assert gb.keep() == 1 and gb.state()["write_failures"] == 1


def test_unbindable_node_is_refused_and_an_unmutated_pod_is_bound_but_reported():
    gb, api, core = _binding()
    _seen(core, "m")
    _seen(core, "u", mutated=False)
    assert gb.before_binding("ns", "m", "m", "mig", [0]).startswith("GPU choice cannot bind on node mig: ")
    assert gb.before_binding("ns", "u", "u", "n1", [0]) == ""
    assert [c for c in api.calls if c[0] != "event"] == []       # no reservation, no ConfigMap for either
    assert [c for c in api.calls if c[0] == "event"] == [("event", "GpuChoiceNotBound", "m"),
                                                          ("event", "GpuChoiceNotBound", "u")]
    rows = gb.state()["not_bound"]
    assert [r["pod"] for r in rows] == ["ns/m", "ns/u"] and "MIG" in rows[0]["reason"]
    assert "did not mutate" in rows[1]["reason"]
    gb.before_binding("ns", "m", "m", "mig", [0])                # once per pod: no second event
    assert len([c for c in api.calls if c[0] == "event"]) == 2


def test_deploy_registers_the_webhook_as_dlsched_does_and_grants_what_it_writes():
    from pathlib import Path

    import yaml

    from dlsched.service.gpu_binding.webhook import registration

    docs = list(yaml.safe_load_all((Path(__file__).resolve().parents[1] / "deploy/gpu-binding.yaml").read_text()))
    shipped = next(d for d in docs if d["kind"] == "MutatingWebhookConfiguration")["webhooks"][0]
    ours = registration("https://127.0.0.1:1/mutate", b"ca")["webhooks"][0]
    for key in ("name", "admissionReviewVersions", "sideEffects", "failurePolicy", "rules", "reinvocationPolicy"):
        assert shipped[key] == ours[key], key
    assert shipped["clientConfig"]["service"]["path"] == "/mutate"
    verbs = {(r["resources"][0], v) for d in docs if d["kind"] in ("ClusterRole", "Role") for r in d["rules"]
             for v in r["verbs"]}
    # binding.py: ConfigMap create (and update on 409); reservation pods list at start, create, delete
    # and ConfigMap list (at start, every namespace) and delete (of pods that ended: keep)
    assert {("configmaps", "create"), ("configmaps", "update"), ("configmaps", "list"), ("configmaps", "delete"),
            ("pods", "list"), ("pods", "create"), ("pods", "delete")} <= verbs
    role = next(d for d in docs if d["kind"] == "Role")
    assert role["metadata"]["namespace"] == "dlsched-hold"     # pods are written in the reservation namespace only


@pytest.mark.parametrize(("args", "message"), [
    (["--gpu-binding", "envvar-configmap"], "error: --gpu-binding envvar-configmap needs --mode scheduler"),
    (["--mode", "scheduler", "--gpu-binding", "envvar-configmap", "--webhook-cert", "/nope"],
     "error: --webhook-cert, --webhook-key and --webhook-ca go together")])
def test_serve_refuses_bad_gpu_binding_options_in_one_line(args, message, tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    repo = Path(__file__).resolve().parents[1]
    done = subprocess.run([sys.executable, "-m", "dlsched.cli.main", "serve", "--api-server", "https://127.0.0.1:1",
                           "--db", f"sqlite:///{tmp_path / 's.db'}", *args], capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, PYTHONPATH=str(repo / "src")), cwd=tmp_path)
    assert done.returncode == 2 and message in done.stdout + done.stderr, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr


def test_a_pod_entered_while_keep_reads_the_core_keeps_its_reservation():
    """keep() reads the core's jobs, then deletes: a bind that began in between is not undone."""
    gb, api, core = _binding()
    _seen(core, "late")
    del core.jobs["late"]   # its job is not in the snapshot keep() reads
    real_lock = core.lock

    class _Race:
        def __enter__(self):
            real_lock.acquire()
            if not gb.held:   # a nomination and its before_binding land during the read
                real_lock.release()
                gb.before_binding("ns", "late", "late", "n1", [4])
                real_lock.acquire()
            return self

        def __exit__(self, *exc):
            real_lock.release()

    core.lock = _Race()
    assert gb.keep() == 0
    assert ("create pod", "dlsched-hold-n1-4") in api.calls and gb.state()["reservations"] == 1


def test_dlsched_deletes_the_configmaps_of_pods_that_ended_and_of_failed_bindings():
    """No garbage collector needed (the test control plane has none): ended pods, failed Bindings."""
    gb, api, core = _binding()
    _seen(core, "a")
    _seen(core, "b")
    assert gb.before_binding("ns", "a", "a", "n1", [0]) == ""
    assert gb.before_binding("ns", "b", "b", "n1", [1]) == ""
    gb.after_binding("b", "API server refused the bind (409)")   # b's ConfigMap was written before its Binding
    gb.keep()
    assert ("delete configmap", "ns/cm-b") in api.calls and ("delete configmap", "ns/cm-a") not in api.calls
    del core.jobs["a"]                                           # a ended
    gb.keep()
    assert ("delete configmap", "ns/cm-a") in api.calls
    state = gb.state()
    assert state["configmaps_deleted"] == 2 and state["configmaps"] == 0 and state["configmaps_written"] == 2
    gb.keep()
    assert len([c for c in api.calls if c[0] == "delete configmap"]) == 2   # once each


def test_a_restart_deletes_the_configmaps_of_pods_gone_while_no_leader_ran():
    from types import SimpleNamespace

    gb, api, core = _binding()
    core.pods["held"] = SimpleNamespace(annotations={"dlsched.io/gpu-configmap": "cm-held", "dlsched.io/gpus": "2"},
                                        node_name="n1")
    core.jobs["held"] = _Job()

    def cm(name: str, owner: str | None) -> dict:
        meta = {"name": name, "namespace": "ns"}
        if owner:
            meta["ownerReferences"] = [{"apiVersion": "v1", "kind": "Pod", "name": owner, "uid": owner}]
        return {"metadata": meta}
    api.configmaps = [cm("cm-held", "held"), cm("cm-gone", "gone"), cm("cm-none", None)]
    gb.recover()
    assert gb.held == {"held": ("n1", (2,))} and gb.state()["orphan_configmaps_found"] == 2
    gb.keep()
    assert sorted(c[1] for c in api.calls if c[0] == "delete configmap") == ["ns/cm-gone", "ns/cm-none"]
    assert gb.configmaps == {"held": ("ns", "cm-held")}   # its pod still holds GPU 2: kept
