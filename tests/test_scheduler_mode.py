"""The scheduler mode without a control plane: the node checks' stand-in, the GPU request left
to the kernel, the watch's back-off, and the bridge + binder against a fake API (what is
written for a pod of dlsched's, for a pod of another scheduler, and for a pod no node passes)."""

from __future__ import annotations

import json
import time

import pytest

pytest.importorskip("kubernetes")

from dlsched.registry import make_policy  # noqa: E402
from dlsched.service.core import SchedulerCore  # noqa: E402
from dlsched.service.runtime import LiveService  # noqa: E402
from dlsched.service.scheduler_mode.bridge import SchedulerBridge  # noqa: E402
from dlsched.service.scheduler_mode.watch import BACKOFF_MAX_S, BACKOFF_MIN_S, backoff  # noqa: E402
from dlsched.service.store import Store  # noqa: E402


def node(name: str, gpus: int = 8, cpu: str = "64", labels: dict | None = None, **spec) -> dict:
    cap = {"cpu": cpu, "memory": "512Gi", "pods": "110", "nvidia.com/gpu": str(gpus)}
    return {"metadata": {"name": name, "labels": labels or {}}, "spec": spec,
            "status": {"capacity": cap, "allocatable": cap}}


def pod(uid: str, gpus: int = 1, cpu: str = "", scheduler: str = "dlsched", node_name: str = "", **spec) -> dict:
    req = {"nvidia.com/gpu": str(gpus), **({"cpu": cpu} if cpu else {})}
    return {"metadata": {"uid": uid, "name": f"pod-{uid}", "namespace": "default",
                         "creationTimestamp": "2026-01-01T00:00:00Z", "resourceVersion": "1"},
            "spec": {"schedulerName": scheduler, "nodeName": node_name or None, **spec,
                     "containers": [{"name": "m", "resources": {"limits": req, "requests": req}}]},
            "status": {"phase": "Running" if node_name else "Pending"}}


def test_the_watch_backs_off_doubling_within_its_bounds():
    waits, w = [], 0.0
    for _ in range(8):
        w = backoff(w)
        waits.append(w)
    assert waits[:3] == [BACKOFF_MIN_S, 2 * BACKOFF_MIN_S, 4 * BACKOFF_MIN_S]
    assert max(waits) == BACKOFF_MAX_S and waits[-1] == BACKOFF_MAX_S


# -- bridge + binder on a fake API ----------------------------------------------------------------
class Raw:
    def __init__(self, obj: dict) -> None:
        self.data = json.dumps(obj).encode()

    def release_conn(self) -> None:
        pass


class FakeApi:
    """Lists what the test put there; records every write."""

    def __init__(self, nodes: list[dict], pods: list[dict]) -> None:
        self.nodes, self.pods = nodes, pods
        self.writes: list[tuple] = []
        self.refuse_status = False   # True: every status patch is refused (422, its tests failed)

    def list_node(self, _preload_content=False, **kw):
        return Raw({"metadata": {"resourceVersion": "10"}, "items": self.nodes})

    def list_pod_for_all_namespaces(self, _preload_content=False, **kw):
        return Raw({"metadata": {"resourceVersion": "20"}, "items": self.pods})

    def create_namespaced_pod_binding(self, name, namespace, body, _preload_content=False):
        self.writes.append(("binding", name, body.target.name, dict(body.metadata.annotations or {})))
        return Raw({})

    def patch_namespaced_pod(self, name, namespace, body, _preload_content=False):
        self.writes.append(("patch", name, [op["op"] for op in body]))
        return Raw({})

    def patch_namespaced_pod_status(self, name, namespace, body, _preload_content=False):
        # a JSON patch: tests of the uid and the absent nodeName, then the condition set
        assert [op["path"] for op in body[:2]] == ["/metadata/uid", "/spec/nodeName"], body
        if self.refuse_status:
            from kubernetes.client.exceptions import ApiException

            raise ApiException(status=422, reason="Unprocessable Entity")
        value = body[-1]["value"]
        self.writes.append(("status", name, value[0] if isinstance(value, list) else value))
        return Raw({})

    def read_namespaced_pod(self, name, namespace, _preload_content=False):
        return Raw(next(p for p in self.pods if p["metadata"]["name"] == name))

    def create_namespaced_event(self, namespace, body, _preload_content=False):
        # a core v1 Event (involvedObject, message) or an events.k8s.io/v1 one (regarding, note)
        about = body.get("involvedObject") or body.get("regarding")
        self.writes.append(("event", about["name"], body["reason"], body.get("message") or body.get("note")))
        return Raw({})


def _service(api: FakeApi, workers: bool = True) -> tuple[LiveService, SchedulerBridge]:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"))
    bridge = SchedulerBridge(api, core, "dlsched")
    bridge.events_api = api   # events.k8s.io/v1 events, where the node checks build those, to the fake too
    service = LiveService(core, bridge, "t", "dlsched", mode="scheduler", nudge=False)
    if workers:
        service.start_binder()
    else:   # the test binds the queued nominations itself
        from dlsched.service.scheduler_mode.binder import Binder

        service.binder = Binder(service)
        core.on_nomination = service.binder.submit
    return service, bridge


def test_a_pod_of_dlscheds_that_requests_no_gpu_is_bound_to_the_emptiest_node_that_passes():
    api = FakeApi([node("a", cpu="1"), node("b"), node("c")],
                  [pod("busy", 0, scheduler="default-scheduler", node_name="b"), pod("plain", 0, cpu="2")])
    service, bridge = _service(api)
    try:
        bridge.reconcile()
        _settle(api, 2)
        # the uid test of the patch (nothing to annotate), then the Binding, on "c": "a" has 1 cpu, "b" a pod
        assert api.writes == [("patch", "pod-plain", ["test", "test"]), ("binding", "pod-plain", "c", {})]
        assert "plain" not in service.core.zero_gpu and "plain" not in service.core.jobs
    finally:
        service.stop()


def _settle(api: FakeApi, count: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while len(api.writes) < count and time.monotonic() < deadline:
        time.sleep(0.02)
    time.sleep(0.1)   # nothing more arrives


def test_a_pod_of_dlscheds_is_bound_once_with_its_gpus_and_another_schedulers_pod_never():
    api = FakeApi([node("a", labels={"zone": "x"}), node("b")],
                  [pod("mine", 2, nodeSelector={"zone": "x"}), pod("theirs", 2, scheduler="default-scheduler")])
    service, bridge = _service(api)
    try:
        bridge.reconcile()
        service.core.run_pass()
        _settle(api, 1)
        assert api.writes == [("binding", "pod-mine", "a", {"dlsched.io/gpus": "0,1"})]
        assert service.core.offered["mine"] == frozenset({"a"})
        assert "theirs" not in service.core.jobs and "theirs" not in bridge.pending
        assert service.mode_state()["binder"] == {"queued": 1, "bound": 1, "failed": 0, "refit": 0}
        # the binder's committer thread made the bind's rows durable (no read flushed them)
        assert service.core.store._binds_pending == 0
        assert {r["state"] for r in service.core.store.assignment_rows() if r["pod_uid"] == "mine"} == {"bound"}
    finally:
        service.stop()


def test_a_pod_no_node_passes_is_reported_once_then_bound_when_a_node_passes():
    api = FakeApi([node("a")], [pod("p", 1, nodeSelector={"zone": "x"})])
    service, bridge = _service(api)
    import threading

    threading.Thread(target=bridge._reporter, daemon=True).start()
    try:
        bridge.reconcile()
        service.core.run_pass()
        _settle(api, 2)
        (kind, name, cond), event = api.writes
        assert (kind, name, cond["reason"]) == ("status", "pod-p", "Unschedulable")
        assert cond["message"] == "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity."
        assert event == ("event", "pod-p", "FailedScheduling", cond["message"])
        bridge._pod_event("MODIFIED", pod("p", 1, nodeSelector={"zone": "x"}))   # its own status patch
        bridge.refit("p")                                                       # same message, within a minute
        _settle(api, 3, timeout=0.5)
        assert len(api.writes) == 2
        bridge._node_event("ADDED", node("z", labels={"zone": "x"}))
        service.core.run_pass()
        _settle(api, 3)
        assert api.writes[2] == ("binding", "pod-p", "z", {"dlsched.io/gpus": "0"})
    finally:
        service.stop()


def test_a_nomination_whose_node_filled_meanwhile_is_decided_again_on_the_nodes_that_pass():
    api = FakeApi([node("a", cpu="2"), node("b", cpu="2")], [])
    service, bridge = _service(api, workers=False)
    core = service.core
    try:
        bridge.reconcile()
        bridge._pod_event("ADDED", pod("p", 1, cpu="2"))
        core.run_pass()
        nominated = core.state.node_ids[core.jobs["p"].placement[0][0]]
        # another scheduler's pod takes the node's cpu before the Binding is sent
        bridge._pod_event("ADDED", pod("other", 0, cpu="2", scheduler="default-scheduler", node_name=nominated))
        facts = core.pods["p"]
        error = service.binder.bind_one(facts, nominated)
        assert error == f"node {nominated} no longer fits the pod: Insufficient cpu"
        assert core.offered["p"] == frozenset({"a", "b"} - {nominated})
        assert api.writes == []
        other = core.state.node_ids[core.jobs["p"].placement[0][0]]
        assert other != nominated
        assert service.binder.bind_one(facts, other) == ""
        assert api.writes == [("binding", "pod-p", other, {"dlsched.io/gpus": "0"})]
    finally:
        service.stop()


# -- the command line ------------------------------------------------------------------------------
def test_mode_flag_bad_value_is_one_error_line_and_the_default_name_follows_the_mode(monkeypatch, tmp_path):
    from typer.testing import CliRunner

    from dlsched.cli import main
    from dlsched.cli.serve_config import service_config
    from dlsched.run.config import PredictionConfig, ServiceTimings

    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    res = CliRunner().invoke(main.app, ["serve", "--mode", "kube", "--api-server", "https://127.0.0.1:1",
                                        "--db", f"sqlite:///{tmp_path}/s.db"])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1] == "error: --mode: 'kube' is not one of extender, scheduler" and "Traceback" not in res.output

    def config(mode: str, name: str = ""):
        return service_config("fifo", False, {}, None, placement=None, max_jobs_per_gpu=1,
                              predictions=PredictionConfig(), timings=ServiceTimings(), note=print,
                              scheduler_name=name, vc_map="", default_vc="default", queues_configmap="",
                              nudge=True, record=None, mode=mode)
    ext, own, named = config("extender"), config("scheduler"), config("scheduler", "gpu-sched")
    assert (ext.scheduler_name, ext.nudge, ext.describe()["mode"]) == ("default-scheduler", True, "extender")
    assert (own.scheduler_name, own.nudge, own.describe()["mode"]) == ("dlsched", False, "scheduler")
    assert named.scheduler_name == "gpu-sched"


# -- deploy/ ---------------------------------------------------------------------------------------
def test_deploy_runs_the_scheduler_mode_with_two_replicas_and_grants_what_it_writes():
    from pathlib import Path

    yaml = pytest.importorskip("yaml")
    from dlsched.service.pods import pod_facts

    deploy = Path(__file__).resolve().parents[1] / "deploy"

    def docs(name: str) -> list[dict]:
        return [d for d in yaml.safe_load_all((deploy / name).read_text()) if d]
    role = next(d for d in docs("rbac-scheduler-mode.yaml") if d["kind"] == "ClusterRole")
    assert [(r["apiGroups"], r["resources"], r["verbs"]) for r in role["rules"]] == \
        [([""], ["pods/status"], ["patch"]), ([""], ["pods"], ["get"]), (["events.k8s.io"], ["events"], ["create"])]
    base = next(d for d in docs("rbac.yaml") if d["kind"] == "ClusterRole")
    granted = {(res, verb) for r in base["rules"] + role["rules"] for res in r["resources"] for verb in r["verbs"]}
    # every write this mode makes: the Binding, the Unschedulable condition, the FailedScheduling event
    assert {("pods/binding", "create"), ("pods/status", "patch"), ("events", "create")} <= granted
    dep, = docs("deployment-scheduler-mode.yaml")
    argv = dep["spec"]["template"]["spec"]["containers"][0]["command"]
    assert dep["spec"]["replicas"] == 2 and "--leader-elect" in argv
    assert argv[argv.index("--mode") + 1] == "scheduler" and argv[argv.index("--scheduler-name") + 1] == "dlsched"
    example, = docs("example-pod-scheduler-mode.yaml")
    facts = pod_facts({**example, "metadata": {**example["metadata"], "uid": "u", "namespace": "default"}})
    assert (facts.scheduler_name, facts.gpus) == ("dlsched", 4)


def test_the_watch_resumes_from_its_last_version_and_lists_again_only_on_410(monkeypatch):
    import threading

    from kubernetes import watch as kwatch

    from dlsched.service.scheduler_mode.watch import watch_kind

    stop = threading.Event()
    calls: list[str] = []
    seen: list[tuple[str, str]] = []

    def event(kind: str, rv: str) -> dict:
        return {"type": kind, "object": {"metadata": {"name": f"n{rv}", "resourceVersion": rv}}}

    script = [
        [event("ADDED", "5"), ConnectionError("dropped")],               # reconnect from 5, no relist
        [event("MODIFIED", "6"), {"type": "ERROR", "object": {"code": 410, "message": "too old"}}],
        [event("DELETED", "12")],                                        # from the relist's version
        [],
    ]

    class FakeWatch:
        def stream(self, lister, resource_version, **kw):
            calls.append(resource_version)
            if len(calls) > len(script) - 1:
                stop.set()
            for item in script[min(len(calls), len(script)) - 1]:
                if isinstance(item, Exception):
                    raise item
                yield item

        def stop(self) -> None:
            pass

    monkeypatch.setattr(kwatch, "Watch", FakeWatch)
    counts: dict[str, int] = {}
    relists: list[int] = []

    def relist() -> str:
        relists.append(1)
        return "11"
    watch_kind(lambda **kw: None, "1", lambda kind, obj: seen.append((kind, obj["metadata"]["name"])),
               relist, stop, counts)
    assert calls == ["1", "5", "11", "12"]
    assert seen == [("ADDED", "n5"), ("MODIFIED", "n6"), ("DELETED", "n12")]
    assert relists == [1] and counts["relists"] == 1 and counts["reconnects"] == 1 and counts["errors"] == 1


def test_a_binding_the_api_server_keeps_refusing_is_retried_with_a_back_off_not_in_a_loop(monkeypatch):
    from kubernetes.client.exceptions import ApiException

    from dlsched.service.scheduler_mode import binder

    monkeypatch.setattr(binder, "RETRY_MIN_S", 0.2)

    class Refusing(FakeApi):
        def create_namespaced_pod_binding(self, name, namespace, body, _preload_content=False):
            self.writes.append(("binding", name, body.target.name))
            raise ApiException(status=403, reason="Forbidden")

    api = Refusing([node("a")], [pod("p", 1)])
    service, bridge = _service(api)
    try:
        bridge.reconcile()
        service.core.run_pass()
        time.sleep(1.0)   # back-offs 0.2 + 0.4 s: three tries, not hundreds
        tries = len(api.writes)
        assert 2 <= tries <= 4, api.writes
        assert service.binder.failures["p"] == tries and service.binder.counts["failed"] == tries
        deadline = time.monotonic() + 1.0   # between two tries its GPU is back (not held by a failed bind)
        while service.core.jobs["p"].state.name != "PENDING" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert service.core.jobs["p"].state.name == "PENDING"
    finally:
        service.stop()


def test_gpus_are_left_to_the_kernel_and_unsupported_terms_are_named():
    from dlsched.service import nodefit
    from dlsched.service.scheduler_mode import fit

    full = node("n", gpus=1)
    holder = pod("h", gpus=1, node_name="n")
    # the device plugin's count says no room; the kernel (which may share GPUs) decides that
    assert nodefit.feasible(pod("p"), [full], {"n": [holder]}).nodes == []
    assert fit.feasible(pod("p"), [full], {"n": [holder]}).nodes == ["n"]
    assert fit.without_gpus(pod("p", cpu="2"))["spec"]["containers"][0]["resources"]["requests"] == {"cpu": "2"}
    odd = pod("o", affinity={"podAntiAffinity": {"x": 1}}, topologySpreadConstraints=[{"maxSkew": 1}])
    assert len(fit.unsupported(odd)) == 2   # both are named


def test_a_pod_that_waits_for_gpus_gets_its_position_and_eta_once_per_change():
    """Issue 34: PodScheduled=False for a pod that passes the node checks but waits for GPUs,
    written at the second tick it is found waiting, then only when its position or ETA moves."""
    import threading

    from dlsched.service.scheduler_mode.waiting import GpuWaitReporter

    api = FakeApi([node("a", gpus=2)], [pod("x", 2), pod("w", 2), pod("y", 2)])
    service, bridge = _service(api)
    threading.Thread(target=bridge._reporter, daemon=True).start()
    core = service.core
    reporter = GpuWaitReporter(core.queue, lambda uid: core.offered.get(uid), bridge.report_waiting,
                               bridge.last_report, "fifo", threshold=60.0, now=core.now)
    try:
        bridge.reconcile()
        core.run_pass()
        _settle(api, 1)
        assert [w[:3] for w in api.writes] == [("binding", "pod-x", "a")]
        assert reporter.tick() == 0            # first tick that finds them waiting: nothing written
        assert reporter.tick() == 2
        _settle(api, 5)
        conds = {w[1]: w[2] for w in api.writes if w[0] == "status"}
        events = [w for w in api.writes if w[0] == "event"]
        assert sorted(conds) == ["pod-w", "pod-y"] and len(events) == 2
        assert conds["pod-w"]["reason"] == "Unschedulable" and conds["pod-w"]["status"] == "False"
        assert conds["pod-w"]["message"].startswith("waiting for GPUs: 1 node(s) pass the node checks but none has "
                                                    "2 GPU(s) for it now; position 1 in the queue of VC default")
        assert "position 2 in the queue" in conds["pod-y"]["message"]
        assert reporter.tick() == 0 and reporter.counts["unchanged"] == 2   # nothing changed: no write
        _settle(api, 6, timeout=0.3)
        assert len(api.writes) == 5
        bridge._pod_event("DELETED", pod("x", 2, node_name="a"))   # x's GPUs free: w is bound, y moves up
        core.pod_gone("x")
        core.run_pass()
        _settle(api, 6)
        assert api.writes[5][:3] == ("binding", "pod-w", "a")
        bridge._pod_event("MODIFIED", pod("w", 2, node_name="a"))
        assert reporter.tick() == 1
        _settle(api, 8)
        assert [w[:2] for w in api.writes[6:]] == [("status", "pod-y"), ("event", "pod-y")]
        assert "position 1 in the queue" in api.writes[6][2]["message"]
        assert reporter.stats()["waiting"] == 1
    finally:
        service.stop()


def test_stage_times_split_each_bind_into_its_steps_and_a_retry_starts_its_steps_again(monkeypatch):
    from dlsched.service.scheduler_mode import stages as mod

    clock = iter([10.0, 10.5, 11.0, 11.25, 11.5, 14.0, 20.0, 20.5, 21.0, 21.5])
    monkeypatch.setattr(mod.time, "time", lambda: next(clock))
    st = mod.StageTimes(window=10)
    st.seen("a")                      # 10.0
    st.mark("a", 1)                   # 10.5 nominated
    st.mark("a", 2)                   # 11.0 picked
    st.mark("a", 3)                   # 11.25 reserved; its Binding fails: no mark 4
    st.mark("a", 1)                   # 11.5 nominated again: the steps after it start again
    st.node_changed()                 # 14.0: a node came
    st.mark("a", 2)                   # 20.0
    st.mark("a", 3)                   # 20.5
    st.mark("a", 4)                   # 21.0 answered: filed
    st.mark("ghost", 1)               # never seen: ignored (no clock read left over matters)
    out = st.summary()
    assert out["binds"] == 1
    assert out["seen->nominated"] == {"p50_ms": 1500.0, "p95_ms": 1500.0}
    assert out["nominated->picked"]["p50_ms"] == 8500.0
    assert out["picked->reserved"]["p50_ms"] == 500.0 and out["reserved->answered"]["p50_ms"] == 500.0


def test_a_pod_seen_before_a_node_came_counts_its_wait_from_that_node(monkeypatch):
    from dlsched.service.scheduler_mode import stages as mod

    clock = iter([0.0, 5.0, 5.2, 5.3, 5.4, 5.5])
    monkeypatch.setattr(mod.time, "time", lambda: next(clock))
    st = mod.StageTimes()
    st.seen("d")          # 0.0: pending, no node has room (a drain)
    st.node_changed()     # 5.0: nodes came
    for step in (1, 2, 3, 4):
        st.mark("d", step)
    assert abs(st.summary()["seen->nominated"]["p50_ms"] - 200.0) < 1e-6


def test_a_report_is_a_tested_patch_and_is_dropped_when_the_pod_was_bound_meanwhile():
    """PodScheduled=False must never land on a pod a Binding bound meanwhile: the patch tests
    the uid and the absent nodeName (the API server refuses it, 422), the pod is read once, and
    a bound pod gets neither the condition nor the event."""
    from dlsched.service.scheduler_mode.bridge import condition_patch

    cond = {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": "m"}
    bare = pod("p")
    assert condition_patch(bare, "p", cond)[2:] == [{"op": "test", "path": "/status/conditions", "value": None},
                                                    {"op": "add", "path": "/status/conditions", "value": [cond]}]
    bare["status"]["conditions"] = [{"type": "Initialized"}, {"type": "PodScheduled", "status": "False"}]
    assert condition_patch(bare, "p", cond)[2:] == [
        {"op": "test", "path": "/status/conditions/1/type", "value": "PodScheduled"},
        {"op": "replace", "path": "/status/conditions/1", "value": cond}]

    api = FakeApi([node("a")], [pod("p", 1, nodeSelector={"zone": "x"})])
    service, bridge = _service(api)
    try:
        bridge.reconcile()
        api.refuse_status = True
        api.pods[0]["spec"]["nodeName"] = "a"   # the API server's copy: bound meanwhile
        assert bridge._write_condition("default", "pod-p", "p", cond) is False
        import threading

        threading.Thread(target=bridge._reporter, daemon=True).start()
        bridge.refit("p")
        _settle(api, 1, timeout=1.0)
        assert api.writes == [] and bridge.counts["reports_too_late"] == 1
    finally:
        service.stop()


class SlowBindings(FakeApi):
    """Each Binding is held until ``together`` Bindings are in flight at once (a loaded API
    server's round trip, long enough for all to be sent), or at most ``hold_s`` after the first
    one; counts the most in flight."""

    def __init__(self, nodes: list[dict], pods: list[dict], together: int, hold_s: float = 3.0) -> None:
        super().__init__(nodes, pods)
        import threading

        self.together, self.hold_s = together, hold_s
        self.lock, self.released, self.first = threading.Lock(), threading.Event(), 0.0
        self.in_flight = self.peak = 0

    def create_namespaced_pod_binding(self, name, namespace, body, _preload_content=False):
        with self.lock:
            self.first = self.first or time.monotonic()
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight >= self.together:
                self.released.set()
        self.released.wait(max(0.0, self.first + self.hold_s - time.monotonic()))
        with self.lock:
            self.in_flight -= 1
        return super().create_namespaced_pod_binding(name, namespace, body, _preload_content)


def _drain(api: SlowBindings, service, bridge, pods: int, timeout: float = 20.0) -> None:
    bridge.reconcile()
    for i in range(pods):
        bridge._pod_event("ADDED", pod(f"q{i}", 1))
    service.core.run_pass()
    deadline = time.monotonic() + timeout
    while service.binder.counts["bound"] < pods and time.monotonic() < deadline:
        time.sleep(0.05)


def test_queued_bindings_are_sent_workers_at_once_never_more_nor_one_by_one():
    """A drain: 64 nominations at once on a slow API server: WORKERS Bindings in flight together
    (none waits for another's answer while a worker is free), never more; all 64 bound."""
    from dlsched.service.scheduler_mode import binder

    api = SlowBindings([node(f"n{i}") for i in range(8)], [], together=binder.WORKERS)
    service, bridge = _service(api)
    try:
        _drain(api, service, bridge, 64)
        assert service.binder.counts["bound"] == 64 and len(api.writes) == 64
        assert api.peak == binder.WORKERS
    finally:
        service.stop()


def test_the_bindings_in_flight_never_exceed_the_binders_workers():
    from dlsched.service.scheduler_mode.binder import Binder

    api = SlowBindings([node(f"n{i}") for i in range(4)], [], together=6, hold_s=1.0)   # 6: never reached
    service, bridge = _service(api, workers=False)
    service.binder = Binder(service, workers=5)
    service.core.on_nomination = service.binder.submit
    service.binder.start(service._done)
    try:
        _drain(api, service, bridge, 30)
        assert service.binder.counts["bound"] == 30 and api.peak == 5
    finally:
        service.stop()


def test_the_watchs_echoes_of_binds_are_committed_by_the_binders_committer_not_the_watch():
    """The pod watch makes no commit of its own per event (one durable commit each, on the one
    thread that reads every pod event); the committer thread makes the rows durable."""
    import threading

    api = FakeApi([node("a")], [pod("p", 1)])
    service, bridge = _service(api)
    store = service.core.store
    committers: list[str] = []
    commit = store.write_behind

    def recorded() -> int:
        committers.append(threading.current_thread().name)
        return commit()
    store.write_behind = recorded
    try:
        bridge.reconcile()
        service.core.run_pass()
        _settle(api, 1)
        assert api.writes == [("binding", "pod-p", "a", {"dlsched.io/gpus": "0"})]
        watched = len(committers)
        bridge._pod_event("MODIFIED", pod("p", 1, node_name="a"))   # the watch shows it bound
        bridge._pod_event("DELETED", pod("p", 1, node_name="a"))    # then gone: its release
        assert threading.current_thread().name not in committers[watched:]
        deadline = time.monotonic() + 5.0
        while store._binds_pending and time.monotonic() < deadline:
            time.sleep(0.02)
        assert store._binds_pending == 0 and set(committers) == {"bind-commit"}
        assert "p" not in service.core.jobs
    finally:
        service.stop()
