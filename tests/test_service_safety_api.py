"""Issue 22 in-process (the app on a real socket, a fake API-server bridge): non-finite numbers are
4xx on every endpoint, the token is checked before the body, an unknown GPU type is a 422 naming
it, GPU utilisation is percent end to end (ffd-util never co-locates past 100 % after the node
agent's readings replace the predictions), zero-GPU pods bind untouched, made-up uids are
refused, unseen nominations expire, and an insecure kubeconfig warns once."""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
import warnings

import pytest

pytest.importorskip("fastapi")
from support.live_app import FakeBridge, LiveApp, pod_json

from dlsched.registry import make_policy
from dlsched.service.agent import FakeSource, run_round
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

TOKEN = "safety-token"


def make(policy: str = "fifo", placement: str | None = "consolidate", share: int = 1, util: float = 40.0,
         gpus: int = 4):
    now = [1000.0]

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = util, 4000.0

    core = SchedulerCore(make_policy(policy, placement, share=share > 1), Store("sqlite://"),
                         max_jobs_per_gpu=share, clock=lambda: now[0], predict=predict)
    core.node_seen(NodeFacts("n1", gpus, "default", "", False))
    return LiveService(core, FakeBridge(), token=TOKEN, observe_after=0.0), now


def raw_post(url: str, raw: bytes, token: str = "") -> tuple[int, object]:
    req = urllib.request.Request(url, data=raw, method="POST", headers={"Content-Type": "application/json"})
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


NON_FINITE = ("NaN", "Infinity", "-Infinity", "1e400", "-1e400")
BODIES = {
    "/scheduler/bind": ['{{"PodName": "a", "PodNamespace": "default", "PodUID": {x}, "Node": "n1"}}', "{x}",
                        '[{x}]'],
    "/api/v1/jobs": ['{{"name": "a", "gpus": {x}}}', '{{"name": "a", "gpus": 1, "batch_size": {x}}}', "{x}"],
    "/api/v1/predictions": ['{{"model": "resnet50", "batch_size": {x}}}', "{x}"],
    "/api/v1/observations": ['{{"node": "n1", "pods": [{{"uid": "p", "gpu_util": {x}}}]}}',
                             '{{"node": "n1", "pods": [{{"uid": "p", "gpu_mem_mib": {x}}}]}}',
                             '{{"node": "n1", "gpus": [{{"util": {x}}}]}}', '{{"node": "n1", "topology": {{"a": {x}}}}}'],
    "/scheduler/filter": ['{{"Pod": {{"metadata": {{"uid": {x}}}}}, "NodeNames": ["n1"]}}'],
}


def test_non_finite_numbers_are_4xx_on_every_endpoint_never_5xx():
    service, _ = make()
    with LiveApp(build_app(service)) as live:
        for path, forms in BODIES.items():
            for form in forms:
                for x in NON_FINITE:
                    body = form.format(x=x)
                    status, out = raw_post(live.url + path, body.encode(), TOKEN)
                    assert status in (400, 422), (path, body, status, out)
                    assert "detail" in out
        # nothing non-finite was kept: what the operator reads still encodes
        assert live.call("GET", "/api/v1/dashboard")["policy"] == "fifo"
        assert service.agents == {}


def test_the_token_is_checked_before_the_body():
    service, _ = make()
    with LiveApp(build_app(service)) as live:
        for path in ("/api/v1/jobs", "/api/v1/predictions", "/api/v1/observations"):
            for body in (b"{not json", b'{"gpus": "x"}', b"NaN", b"[]"):
                assert raw_post(live.url + path, body)[0] == 403, (path, body)
                assert raw_post(live.url + path, body, "wrong")[0] == 403, (path, body)
                assert raw_post(live.url + path, body, TOKEN)[0] == 422, (path, body)


def test_an_unknown_gpu_type_is_refused_naming_it():
    service, _ = make()
    with LiveApp(build_app(service)) as live:
        status, out = raw_post(live.url + "/api/v1/predictions",
                               b'{"model": "resnet50", "batch_size": 32, "gpu": "H900"}', TOKEN)
        assert status == 422 and "H900" in out["detail"] and "V100" in out["detail"], out
        schema = live.call("GET", "/openapi.json")["components"]["schemas"]
        assert "percent" in schema["Observation"]["properties"]["gpu_util"]["description"]
        assert "percent" in schema["Prediction"]["properties"]["gpu_util"]["description"]


def test_ffd_util_never_colocates_past_100_percent_after_agent_rounds():
    """The agent's readings (percent, like the predictions) replace the predictions; ffd-util
    then joins a pod to a GPU only while the holders' readings plus its prediction add up to at
    most 100 %. With readings in 0-1 (before), a corrected pod looked almost idle and GPUs were
    packed to 146-188 %."""
    service, now = make("ffd-util", None, share=3, util=35.0)
    core, st = service.core, service.core.state
    source = FakeSource(4, seed=5, noise=0.0)
    joined = 0
    with LiveApp(build_app(service)) as live:
        for r in range(5):
            for i in range(4):
                uid = f"r{r}-{i}"
                if not live.schedule(uid, 1, ["n1"], model="m"):
                    continue
                for g, _ in core.slots[uid]:
                    holders = st.gpu_holders(0, g)
                    # what each holder uses: its agent reading once it has one, else its prediction
                    load = sum(source.steady(j.job_id)[0] if j.job_id in core.observed else j.pred_gpu_util
                               for j in holders)
                    assert load <= 100.0 + 1e-6, (uid, g, [(j.job_id, j.pred_gpu_util) for j in holders])
                    joined += len(holders) > 1 and r > 0
            now[0] += 5
            answer = run_round(source, live.url, TOKEN, "n1")
            assert answer.get("corrected", 0) >= 1, answer
            for uid in core.observed:   # the reading replaced the prediction as it is: percent
                assert core.jobs[uid].pred_gpu_util == pytest.approx(source.steady(uid)[0], abs=0.01)
                assert 30 <= core.jobs[uid].pred_gpu_util <= 95
            for uid in [u for u in list(core.jobs) if u.startswith(f"r{r - 1}-")]:
                core.pod_gone(uid)   # the previous round's pods end: room for the next
        assert joined >= 2   # pods did join observed pods' GPUs (the bound was exercised)


def test_zero_gpu_pod_is_bound_untouched_and_a_made_up_uid_is_refused():
    service, _ = make()
    core = service.core
    with LiveApp(build_app(service)) as live:
        out = live.call("POST", "/scheduler/filter", {"Pod": pod_json("z", 0), "NodeNames": ["n1"]})
        assert out["NodeNames"] == ["n1"]
        res = live.call("POST", "/scheduler/bind", {"PodName": "z", "PodNamespace": "default", "PodUID": "z",
                                                    "Node": "n1"})
        assert res == {"Error": ""}
        assert service.bridge.binds[-1] == ("default", "z", "z", "n1", ())      # no GPU annotation
        assert "z" not in core.jobs and not core.state.node_mask[0]
        # the API server has default/real as uid "real": a filter with another uid is not nominated
        core.pod_seen(PodFacts("real", "default", "real", 1, created=1.0))
        core.run_pass()
        held = core.state.node_mask[0]
        fake = pod_json("made-up", 1)
        fake["metadata"]["name"] = "real"
        out = live.call("POST", "/scheduler/filter", {"Pod": fake, "NodeNames": ["n1"]})
        assert out["NodeNames"] == [] and "uid" in out["FailedNodes"]["n1"]
        res = live.call("POST", "/scheduler/bind", {"PodName": "real", "PodNamespace": "default",
                                                    "PodUID": "made-up", "Node": "n1"})
        assert res["Error"] and core.state.node_mask[0] == held and "made-up" not in core.jobs
        # a bound copy or a deleted copy inside a filter call changes nothing
        bound = pod_json("real", 1)
        bound["spec"]["nodeName"] = "n1"
        bound["metadata"]["deletionTimestamp"] = "2026-01-01T00:00:00Z"
        live.call("POST", "/scheduler/filter", {"Pod": bound, "NodeNames": ["n1"]})
        assert core.jobs["real"].state.name == "ASSUMED"


def test_nominations_of_pods_the_api_server_never_showed_expire():
    service, now = make()
    core = service.core
    with LiveApp(build_app(service)) as live:
        out = live.call("POST", "/scheduler/filter", {"Pod": pod_json("ghost", 4), "NodeNames": ["n1"]})
        assert out["NodeNames"] == ["n1"]
        core.pod_seen(PodFacts("seen", "default", "seen", 1, created=2.0))   # shown by the API server
        now[0] += 29
        assert core.expire_unseen(30.0) == 0
        now[0] += 2
        assert core.expire_unseen(30.0) == 1
        assert "ghost" not in core.jobs
        assert core.jobs["seen"].state.name == "ASSUMED"   # the GPUs went to the pod that exists
        assert core.counters["nominations expired (pod unknown to the API server)"] == 1


def test_only_a_nomination_after_a_wait_answer_is_nudged():
    service, _ = make(gpus=2)
    core = service.core
    told = []
    core.nudge = lambda pod, node, gpus, waited: told.append((pod.key, node, gpus, waited))
    with LiveApp(build_app(service)) as live:
        assert live.schedule("a", 2, ["n1"]) == "n1"       # nominated inside its own filter: answered there
        assert live.schedule("b", 2, ["n1"]) == ""         # told to wait
        assert told == []
        core.pod_gone("a")
        core.run_pass()                                    # as the watch does after the deletion
        assert told == [("default/b", "n1", "0,1", True)]  # kube-scheduler must be nudged
        assert live.schedule("b", 2, ["n1"]) == "n1"
        core.pod_seen(PodFacts("w", "default", "w", 1, created=3.0))   # from the watch, never filtered
        core.pod_gone("b")
        core.run_pass()
        assert len(told) == 1                              # kube-scheduler will ask about it anyway


def test_insecure_kubeconfig_warns_once_in_our_words(tmp_path, caplog):
    pytest.importorskip("kubernetes")
    import urllib3

    from dlsched.service import kube

    cfg = {"apiVersion": "v1", "kind": "Config", "current-context": "c",
           "clusters": [{"name": "k", "cluster": {"server": "https://127.0.0.1:1", "insecure-skip-tls-verify": True}}],
           "users": [{"name": "u", "user": {"token": "t"}}],
           "contexts": [{"name": "c", "context": {"cluster": "k", "user": "u"}}]}
    path = tmp_path / "kubeconfig"
    path.write_text(json.dumps(cfg))
    kube._warned_insecure.clear()
    with caplog.at_level(logging.WARNING, logger="dlsched.service"):
        kube.make_api(str(path))
        kube.make_api(str(path))
    ours = [r for r in caplog.records if "not verifying the API server's certificate" in r.getMessage()]
    assert len(ours) == 1 and "insecure-skip-tls-verify" in ours[0].getMessage()
    with warnings.catch_warnings(record=True) as seen:
        warnings.warn("x", urllib3.exceptions.InsecureRequestWarning, stacklevel=1)
    assert seen == []
