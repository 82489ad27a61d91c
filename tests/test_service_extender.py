"""The extender on the bodies a real kube-scheduler v1.20 sent (../shared/k8s/captured), driven
through the HTTP app with a fake API-server bridge: nominations, reasons, bind, forget."""

from __future__ import annotations

import copy
import json

import pytest

pytest.importorskip("fastapi")
from fastapi.testclient import TestClient

from dlsched.registry import make_policy
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts, pod_facts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store


class FakeBridge:
    """Records binds; fails the ones whose pod name is listed."""

    def __init__(self, fail: set[str] = frozenset()) -> None:
        self.fail = set(fail)
        self.binds: list[tuple] = []

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        self.binds.append((namespace, name, uid, node, tuple(gpus or ())))
        return "conflict: pod already bound" if name in self.fail else ""


@pytest.fixture
def captured(shared):
    root = shared / "k8s/captured"
    if not root.is_dir():
        pytest.skip("../shared/k8s/captured is absent")

    def load(name: str):
        return json.loads((root / name).read_text())
    return load


def make_service(policy="fifo", nodes=(("gpu-node-a", 8), ("gpu-node-b", 8)), fail=()):
    core = SchedulerCore(make_policy(policy, "consolidate"), Store("sqlite://"), clock=iter(range(1000, 10**6)).__next__)
    for name, gpus in nodes:
        core.node_seen(NodeFacts(name, gpus, "default", "", False))
    bridge = FakeBridge(set(fail))
    service = LiveService(core, bridge, token="secret")
    return service, TestClient(build_app(service)), bridge


def test_filter_nodes_mode_passes_only_the_nominated_node(captured):
    service, client, _ = make_service()
    body = captured("filter-1.json")
    resp = client.post("/scheduler/filter", json=body)
    assert resp.status_code == 200
    out = resp.json()
    assert set(out) == {"Nodes", "NodeNames", "FailedNodes", "Error"}
    assert out["NodeNames"] is None and out["Error"] == ""
    passed = [n["metadata"]["name"] for n in out["Nodes"]["items"]]
    assert len(passed) == 1
    # the node objects come back whole, as the scheduler sent them
    sent = {n["metadata"]["name"]: n for n in body["Nodes"]["items"]}
    assert out["Nodes"]["items"][0] == sent[passed[0]]
    # a nomination lists no failed node: kube-scheduler reads that map only for a pod that fits
    # nowhere; the answer and its reason are kept for the operator (the dashboard's answers)
    assert out["FailedNodes"] == {}
    other = ({"gpu-node-a", "gpu-node-b"} - set(passed)).pop()
    shown = client.get("/api/v1/dashboard").json()["filters"]
    assert any(f["outcome"] == "nominated" and passed[0] in f["reason"] and f["rejected"] == 1 for f in shown)
    # prioritize on the same pod: the nominated node gets the top score, the other one the
    # placement's (consolidate ranks like best fit: 4 of its 8 GPUs would stay free,
    # 1 - 4/8 = 0.5 -> 1 + 8 * 0.5 = 5)
    prio = client.post("/scheduler/prioritize", json=captured("prioritize-1.json")).json()
    assert {p["Host"]: p["Score"] for p in prio} == {passed[0]: 10, other: 5}
    # the GPUs are held by the nomination (assume), durably
    rows = service.core.store.assignment_rows()
    assert [(r["node"], r["gpu"], r["state"]) for r in rows] == [(passed[0], g, "assumed") for g in range(4)]


def test_bind_confirms_and_annotates_the_nominated_gpus(captured):
    service, client, bridge = make_service(nodes=(("gpu-node-a", 8),))
    client.post("/scheduler/filter", json=captured("filter-1.json"))
    out = client.post("/scheduler/bind", json=captured("bind-1.json")).json()
    assert out == {"Error": ""}
    assert bridge.binds == [("default", "train-4gpu", "a1ca57d9-0aa0-4e21-aac5-cfb0f0a5e36f", "gpu-node-a",
                             (0, 1, 2, 3))]
    job = service.core.jobs["a1ca57d9-0aa0-4e21-aac5-cfb0f0a5e36f"]
    assert job.state.name == "RUNNING"
    kinds = [d["kind"] for d in service.core.store.decision_log()]
    assert kinds == ["submit", "assume", "bind"]
    service.core.state.check_invariants()


def test_failed_bind_is_forgotten_and_the_gpus_return(captured):
    service, client, _ = make_service(nodes=(("gpu-node-a", 8),), fail={"train-4gpu"})
    client.post("/scheduler/filter", json=captured("filter-1.json"))
    out = client.post("/scheduler/bind", json=captured("bind-1.json")).json()
    assert out["Error"].startswith("conflict")
    assert client.get("/api/v1/state").json()["binds"] == {"binds": 0, "bind_failures": 1}
    st = service.core.state
    assert (st.node_free[0], st.n_pending, st.n_running) == (8, 1, 0)   # GPUs back, pod queued again
    assert service.core.store.assignment_rows() == []
    assert [d["kind"] for d in service.core.store.decision_log()] == ["submit", "assume", "forget"]
    st.check_invariants()
    # the scheduler retries the pod: nominated again, same GPUs
    out = client.post("/scheduler/filter", json=captured("filter-1.json")).json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["gpu-node-a"]
    assert len(service.core.store.assignment_rows()) == 4


def test_bind_for_a_node_that_was_not_nominated_is_refused(captured):
    service, client, bridge = make_service(nodes=(("gpu-node-a", 8),))
    client.post("/scheduler/filter", json=captured("filter-1.json"))
    args = dict(captured("bind-1.json"), Node="gpu-node-z")
    out = client.post("/scheduler/bind", json=args).json()
    assert "nominated for gpu-node-a, not gpu-node-z" in out["Error"]
    assert bridge.binds == []


def test_cache_mode_node_names(captured):
    service, client, bridge = make_service(nodes=(("gpu-node-a", 8), ("gpu-node-d", 8)))
    out = client.post("/scheduler/filter", json=captured("cache-mode/filter-1.json")).json()
    assert out["Nodes"] is None and out["NodeNames"] == ["gpu-node-a"] and out["FailedNodes"] == {}
    assert client.post("/scheduler/bind", json=captured("cache-mode/bind-1.json")).json() == {"Error": ""}
    # the 1-GPU pod goes where consolidate puts it: the node already holding 2 GPUs
    out = client.post("/scheduler/filter", json=captured("cache-mode/filter-2.json")).json()
    assert out["NodeNames"] == ["gpu-node-a"] and out["FailedNodes"] == {}
    assert client.post("/scheduler/bind", json=captured("cache-mode/bind-2.json")).json() == {"Error": ""}
    assert bridge.binds[1][4] == (2,)   # GPUs 0,1 held by the first pod


def test_queued_pod_is_rejected_on_every_node_with_the_reason(captured):
    _, client, _ = make_service(nodes=(("gpu-node-b", 8),))
    client.post("/scheduler/filter", json=captured("filter-1.json"))   # 4 GPUs nominated on b
    out = client.post("/scheduler/filter", json=captured("filter-2.json")).json()   # 8 GPUs: must wait
    assert out["Nodes"]["items"] == []
    assert "queued by dlsched (fifo)" in out["FailedNodes"]["gpu-node-b"]
    assert "4 GPUs free" in out["FailedNodes"]["gpu-node-b"]


def test_deleted_pod_frees_its_gpus_and_the_next_pod_is_nominated(captured):
    service, client, _ = make_service(nodes=(("gpu-node-b", 8),))
    client.post("/scheduler/filter", json=captured("filter-1.json"))
    client.post("/scheduler/filter", json=captured("filter-2.json"))
    service.core.pod_gone("a1ca57d9-0aa0-4e21-aac5-cfb0f0a5e36f")
    out = client.post("/scheduler/filter", json=captured("filter-2.json")).json()
    assert [n["metadata"]["name"] for n in out["Nodes"]["items"]] == ["gpu-node-b"]
    rows = service.core.store.assignment_rows()
    assert len(rows) == 8 and {r["pod"] for r in rows} == {"default/train-8gpu"}


def test_qssf_and_fifo_nominate_in_different_orders(captured):
    """Same three pods, 8 free GPUs: FIFO starts the 8-GPU pod that came first, QSSF the small ones."""
    pods = []
    for i, gpus in enumerate((8, 2, 1)):
        body = copy.deepcopy(captured("cache-mode/filter-1.json"))
        meta = body["Pod"]["metadata"]
        meta["uid"], meta["name"] = f"uid-{i}", f"p{i}"
        meta["creationTimestamp"] = f"2026-11-22T14:50:4{i}Z"
        for key in ("requests", "limits"):
            body["Pod"]["spec"]["containers"][0]["resources"][key]["nvidia.com/gpu"] = str(gpus)
        pods.append(pod_facts(body["Pod"]))
    started = {}
    for policy in ("fifo", "qssf"):
        service, _, _ = make_service(policy, nodes=(("gpu-node-a", 8),))
        for pod in pods:
            service.core.pod_seen(pod)
        service.core.run_pass()
        started[policy] = sorted(uid for uid, j in service.core.jobs.items() if j.state.name == "ASSUMED")
    assert started["fifo"] == ["uid-0"]
    assert started["qssf"] == ["uid-1", "uid-2"]


@pytest.mark.parametrize("body, status", [
    (b"not json", 400),
    (b"[]", 400),
    (b'{"Pod": 3, "NodeNames": ["a"]}', 400),
    (b'{"Pod": {"metadata": {"uid": "u", "name": "n"}}}', 400),
    ((b'{"Pod": {"metadata": {"uid": "u", "name": "n"}, "spec": {"containers": [{"resources": '
      b'{"limits": {"nvidia.com/gpu": "lots"}}}]}}, "NodeNames": ["a"]}'), 400),
])
def test_malformed_extender_bodies_get_400(body, status):
    _, client, _ = make_service()
    resp = client.post("/scheduler/filter", content=body, headers={"content-type": "application/json"})
    assert resp.status_code == status, resp.text
    assert "detail" in resp.json()


def test_oversized_body_gets_413():
    _, client, _ = make_service()
    resp = client.post("/api/v1/jobs", content=b"x" * 70000, headers={"authorization": "Bearer secret"})
    assert resp.status_code == 413


def test_mutating_operator_calls_need_the_token():
    _, client, _ = make_service()
    body = {"name": "j1", "gpus": 2}
    assert client.post("/api/v1/jobs", json=body).status_code == 403
    assert client.post("/api/v1/jobs", json=body, headers={"authorization": "Bearer wrong"}).status_code == 403
    assert client.post("/api/v1/predictions", json={"model": "resnet50"}).status_code == 403
    assert client.get("/api/v1/state").status_code == 200


def _facts(uid: str, gpus: int, node: str = "", phase: str = "Pending") -> PodFacts:
    return PodFacts(uid, "default", f"pod-{uid}", gpus, node, phase, created=100.0 + len(uid))


def test_cordoned_new_and_deleted_nodes_follow_the_api_server():
    service, _, _ = make_service(nodes=(("a", 8),))
    core = service.core
    core.node_seen(NodeFacts("a", 8, "default", "", True))          # cordoned: nothing goes there
    core.pod_seen(_facts("p1", 2))
    core.run_pass()
    assert core.jobs["p1"].state.name == "PENDING"
    assert core.filter(_facts("p1", 2), ["a"])[0] == []
    core.node_seen(NodeFacts("b", 4, "default", "", False))         # a new node: the pod goes there
    passed, _ = core.filter(_facts("p1", 2), ["a", "b"])
    assert passed == ["b"]
    core.begin_bind("p1", "b")
    core.end_bind("p1", "b", "")
    core.node_gone("b")                                             # deleted while p1 runs on it
    assert core.state.node_cordoned[core.state.node_index["b"]]
    core.pod_seen(_facts("p1", 2, node="b", phase="Succeeded"))     # p1 ends: the node goes for good
    assert "b" not in core.state.node_index
    assert [d["kind"] for d in core.store.decision_log()][-1] == "finish"
    core.state.check_invariants()


def test_a_pod_bound_by_someone_else_is_adopted_with_its_annotation():
    service, _, _ = make_service(nodes=(("a", 8),))
    core = service.core
    core.pod_seen(PodFacts("x", "default", "pod-x", 3, "a", "Running", annotations={"dlsched.io/gpus": "5,6,7"}))
    core.pod_seen(PodFacts("y", "default", "pod-y", 2, "a", "Running"))        # no annotation: lowest free GPUs
    holders = {j.job_id: m for j, m in core.state.node_holders[0].items()}
    assert holders == {"x": 0b11100000, "y": 0b00000011}
    core.pod_seen(_facts("z", 4))
    assert core.filter(_facts("z", 4), ["a"])[0] == []                        # 3 GPUs left: z waits
    assert "3 GPUs free" in core.why_waiting("z")
    core.pod_gone("x")
    assert core.filter(_facts("z", 4), ["a"])[0] == ["a"]
    assert [g for g, _ in core.slots["z"]] == [2, 3, 4, 5]
    core.state.check_invariants()


def test_predictions_need_the_token_and_name_the_problem():
    _, client, _ = make_service()
    auth = {"authorization": "Bearer secret"}
    resp = client.post("/api/v1/predictions", json={"model": "resnet50", "batch_size": 32}, headers=auth)
    if resp.status_code == 404 and "no resource predictor" in resp.text:
        pytest.skip("no default resource predictor in this installation")
    assert resp.status_code == 200, resp.text
    out = resp.json()
    assert 0 < out["gpu_util"] <= 100 and out["gpu_mem_mib"] > 0
    assert client.post("/api/v1/predictions", json={"model": "no-such-model"}, headers=auth).status_code == 404
    bad = client.post("/api/v1/predictions", json={"model": "../etc/passwd.onnx"}, headers=auth)
    assert bad.status_code == 422 and "model must be" in bad.text


def test_gpu_sharing_uses_slots_and_predicted_memory():
    """Up to 2 jobs per GPU where their predicted memory fits (V100: 32,768 MiB): the second job
    gets slot 1 of a GPU, the annotation names the shared GPU, a job that fits nowhere waits."""
    mem = {"small": 8000.0, "big": 30000.0}

    def predict(job):
        job.pred_gpu_mem_mib = mem[job.model_name]

    core = SchedulerCore(make_policy("fifo", "consolidate", share=True), Store("sqlite://"), max_jobs_per_gpu=2,
                         clock=iter(range(1000, 10**6)).__next__, predict=predict)
    core.node_seen(NodeFacts("n", 2, "default", "", False))
    bridge = FakeBridge()
    service = LiveService(core, bridge)

    def pod(uid: str, gpus: int, model: str) -> PodFacts:
        return PodFacts(uid, "default", uid, gpus, created=float(len(core.jobs)),
                        annotations={"dlsched.io/model": model})

    for p in (pod("p1", 2, "small"), pod("p2", 1, "small"), pod("p3", 1, "big")):
        core.pod_seen(p)
    core.run_pass()
    assert service.bind("default", "p1", "p1", "n") == ""
    assert service.bind("default", "p2", "p2", "n") == ""
    assert [b[4] for b in bridge.binds] == [(0, 1), (0,)]
    rows = [(r["gpu"], r["slot"], r["pod"]) for r in core.store.assignment_rows()]
    assert rows == [(0, 0, "default/p1"), (0, 1, "default/p2"), (1, 0, "default/p1")]
    assert core.filter(pod("p3", 1, "big"), ["n"])[0] == []          # 30,000 MiB fits on no GPU
    core.pod_gone("p1")
    assert core.filter(pod("p3", 1, "big"), ["n"])[0] == ["n"]
    assert core.slots["p3"] == [(1, 0)]                             # the GPU p2 does not use
    core.state.check_invariants()


AWKWARD = ["plain-node", 'quote"node', "back\\slash", "tab\tnode", "ünïcode-节点", "plain-node", "\u2028sep"]


@pytest.mark.parametrize("names", [
    [f"node-{i:04d}" for i in range(50)],
    ["ünïcode-节点", "node-b"],                          # non-ASCII needs no escaping
    ["node-0001", "node-0002", "node-0001"],           # a name twice: one FailedNodes entry, two scores
    AWKWARD,
    [],
])
def test_byte_replies_match_the_reference_dicts(names):
    """The replies written as bytes decode to exactly what filter_result / priority_result give,
    whatever the node names hold (quotes, backslashes, control characters, non-ASCII, repeats)."""
    from dlsched.service.extender import filter_reply, filter_result, priority_result, scores_reply

    why = 'queued by "dlsched" (fifo): 3 of 9 \\ pending'
    for passed in ([], names[1:2], list(names)):
        failed = {} if passed else dict.fromkeys(names, why)   # a nomination lists no failed node
        assert json.loads(filter_reply(passed, why, names, None)) == filter_result(passed, failed, None)
        items = [{"metadata": {"name": n}, "status": {"i": i}} for i, n in enumerate(names)]
        assert json.loads(filter_reply(passed, why, names, items)) == filter_result(passed, failed, items)
    for nominated in ("", names[0] if names else "x", "absent"):
        scores = [(n, 10 if n == nominated else 0) for n in names]
        assert json.loads(scores_reply(names, [s for _, s in scores])) == priority_result(scores)
    for scores in ([i % 11 for i in range(len(names))], [100 + i for i in range(len(names))]):
        assert json.loads(scores_reply(names, scores)) == priority_result(list(zip(names, scores)))


def test_fastapi_routes_answer_as_the_front_does(captured):
    """The extender routes in the FastAPI app (what the OpenAPI schema documents) give the same
    answers as the lean path the server runs."""
    service, client, _ = make_service()
    direct = TestClient(client.app.app)
    body = captured("cache-mode/filter-1.json")
    lean = client.post("/scheduler/filter", json=body)
    again = direct.post("/scheduler/filter", json=body)
    assert lean.status_code == again.status_code == 200
    assert lean.json() == again.json() and lean.headers["content-type"] == again.headers["content-type"]
    for path in ("/scheduler/prioritize", "/empty"):
        assert client.post(path, json=body).json() == direct.post(path, json=body).json()
    assert direct.post("/scheduler/filter", content=b"[]").status_code == 400


def test_extender_needs_a_content_length_and_refuses_oversized_bodies():
    _, client, _ = make_service()
    app = client.app

    async def call(headers):
        sent = []

        async def receive():
            return {"type": "http.request", "body": b"{}", "more_body": False}

        async def send(message):
            sent.append(message)
        scope = {"type": "http", "method": "POST", "path": "/scheduler/filter", "headers": headers}
        await app(scope, receive, send)
        return sent[0]["status"], json.loads(sent[1]["body"])

    import asyncio

    assert asyncio.run(call([]))[0] == 411
    status, out = asyncio.run(call([(b"content-length", str(64 * 1024 * 1024).encode())]))
    assert status == 413 and "larger than" in out["detail"]
