"""The node agent with fake GPUs against the in-process service: readings flow in, replace the
predictions after the warm-up, and a pod observed over its GPU's memory fails over as an OOM."""

from __future__ import annotations

import pytest

pytest.importorskip("fastapi")
from support.live_app import FakeBridge, LiveApp
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.registry import make_policy
from dlsched.service.agent import FakeSource, run_round
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

TOKEN = "agent-token"


def make(share: int = 1, warmup: float = 60.0):
    now = [1000.0]

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = 50.0, 8000.0

    core = SchedulerCore(make_policy("fifo", "consolidate", share=share > 1), Store("sqlite://"),
                         max_jobs_per_gpu=share, clock=lambda: now[0], predict=predict)
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    service = LiveService(core, FakeBridge(), token=TOKEN, observe_after=warmup)
    return service, now


def test_fake_agent_readings_replace_predictions_after_the_warmup():
    service, now = make()
    core = service.core
    with LiveApp(build_app(service)) as live:
        assert live.schedule("p1", 2, ["n1"], model="m") == "n1"
        assert live.schedule("p2", 1, ["n1"], model="m") == "n1"
        runner = CliRunner()
        argv = ["agent", "--service", live.url, "--token", TOKEN, "--node", "n1", "--fake-gpus", "4",
                "--seed", "7", "--rounds", "1", "--interval", "0"]
        now[0] += 10
        res = runner.invoke(app, argv)
        assert res.exit_code == 0, res.output
        assert "2 pods reported" in res.output and "'warming up': 2" in res.output
        assert core.jobs["p1"].pred_gpu_util == 50.0 and core.jobs["p1"].observed_at < 0
        now[0] += 60
        res = runner.invoke(app, argv)
        assert "'corrected': 2" in res.output, res.output
        steady = FakeSource(4, seed=7)
        for uid in ("p1", "p2"):
            job = core.jobs[uid]
            util, mem = core.observed[uid][:2]
            assert job.pred_gpu_util == util and job.pred_gpu_mem_mib == mem      # the reading replaced them
            assert (job.prior_gpu_util, job.prior_gpu_mem_mib) == (50.0, 8000.0)  # the prediction is kept
            s_util, s_mem = steady.steady(uid)
            assert mem == pytest.approx(s_mem, abs=0.1) and abs(util - s_util) < 15
            assert 30 <= s_util <= 95 and 0.15 * 32768 <= s_mem <= 0.6 * 32768
        assert service.agents["n1"]["gpus"][0]["memory_total_mib"] == 32768.0
        assert len(service.agents["n1"]["gpus"]) == 4
        # the agent's inventory is per GPU: p1's two GPUs each hold its memory
        g0 = service.agents["n1"]["gpus"][core.slots["p1"][0][0]]
        assert list(g0["pods"]) == ["p1"]
        # the same seed reads the same steady values on a second agent
        assert FakeSource(4, seed=7).steady("p1") == steady.steady("p1")
        assert FakeSource(4, seed=8).steady("p1") != steady.steady("p1")


def test_a_pod_over_its_gpu_memory_fails_over_like_an_oom():
    service, now = make(share=2, warmup=0.0)
    core = service.core
    with LiveApp(build_app(service)) as live:
        nodes = ["n1"]
        for uid, gpus in (("p1", 2), ("p2", 2), ("p3", 1)):
            assert live.schedule(uid, gpus, nodes, model="m") == "n1"
        shared_gpu = core.slots["p3"][0][0]
        older = next(u for u in ("p1", "p2") if any(g == shared_gpu for g, _ in core.slots[u]))
        # every pod uses 60% of a 32 GiB GPU: alone each fits; the shared GPU holds 120%
        source = FakeSource(4, seed=1, mem_fraction=(0.6, 0.6))
        now[0] += 5
        answer = run_round(source, live.url, TOKEN, "n1")
        assert answer == {"node": "n1", "corrected": 2, "oom": 1}
        job = core.jobs["p3"]                      # the newest holder of the shared GPU failed
        assert job.state.name == "PENDING" and job.failures == 1
        assert job.observed_mem_mib == pytest.approx(0.6 * 32768)
        assert job.pred_gpu_mem_mib == pytest.approx(0.6 * 32768)   # the policy's job_failed corrected it
        assert core.jobs[older].state.name == "RUNNING"
        assert "p3" not in core.slots and all(r["pod_uid"] != "p3" for r in core.store.assignment_rows())
        assert [d["kind"] for d in core.store.decision_log() if d["pod_uid"] == "p3"][-1] == "oom"
        assert "out of GPU memory" in core.why_waiting("p3")
        # re-placed with its observed memory: it no longer fits beside a 60% pod
        out = live.call("POST", "/scheduler/filter",
                        {"Pod": {"metadata": {"uid": "p3", "name": "p3", "namespace": "default"},
                                 "spec": {"containers": [{"name": "m", "resources": {
                                     "limits": {"nvidia.com/gpu": "1"}}}]}, "status": {"phase": "Pending"}},
                         "NodeNames": nodes})
        assert out["NodeNames"] == []
        core.state.check_invariants()


def test_agent_bad_input_is_one_error_line():
    runner = CliRunner()
    res = runner.invoke(app, ["agent", "--service", "ftp://x", "--token", "t", "--fake-gpus", "2"])
    assert res.exit_code == 2 and "--service ftp://x" in res.output
    res = runner.invoke(app, ["agent", "--fake-gpus", "2", "--rounds", "1"], env={"DLSCHED_TOKEN": ""})
    assert res.exit_code == 2 and "--token" in res.output
    res = runner.invoke(app, ["agent", "--service", "http://127.0.0.1:9", "--token", "t", "--fake-gpus", "2",
                              "--rounds", "1"])
    assert res.exit_code == 2 and res.output.strip().startswith("error: --service http://127.0.0.1:9")


def test_daemonset_runs_the_agent_with_the_node_name_and_token():
    yaml = pytest.importorskip("yaml")
    from pathlib import Path

    ds, = [d for d in yaml.safe_load_all((Path(__file__).parents[1] / "deploy/agent-daemonset.yaml").read_text())
           if d]
    assert ds["kind"] == "DaemonSet" and ds["spec"]["template"]["spec"]["hostPID"] is True
    container, = ds["spec"]["template"]["spec"]["containers"]
    assert container["command"][:2] == ["dlsched", "agent"]
    env = {e["name"]: e for e in container["env"]}
    assert env["NODE_NAME"]["valueFrom"]["fieldRef"]["fieldPath"] == "spec.nodeName"
    assert env["DLSCHED_TOKEN"]["valueFrom"]["secretKeyRef"]["name"] == "dlsched-operator"
    # every option the manifest passes is one the agent takes
    from dlsched.cli.agent_cmd import register  # noqa: F401 - the command module exists
    res = CliRunner().invoke(app, ["agent", "--help"])
    for opt in (a for a in container["command"] if a.startswith("--")):
        assert opt in res.output


def test_nvml_path_reads_real_gpus_or_says_why_not():
    """On a GPU machine the NVML source reads every GPU; elsewhere one error line naming NVML."""
    import json

    res = CliRunner().invoke(app, ["agent", "--print-reading", "--rounds", "1", "--node", "here"])
    if res.exit_code == 0:
        reading = json.loads(res.output.strip().splitlines()[-1])
        assert reading["node"] == "here" and reading["gpus"]
        assert all(g["memory_total_mib"] > 0 and 0 <= g["util"] <= 100 for g in reading["gpus"])
    else:
        assert res.exit_code == 2 and res.output.startswith("error: ") and "NVML" in res.output


def test_a_live_oom_corrects_the_co_runner_whose_reading_is_over_its_prediction():
    """The co-runner is still in its warm-up (no correction of its own yet), but its reading of 60 %
    of the GPU is above its 8,000 MiB prediction: the OOM of the newest holder corrects it too."""
    service, now = make(share=2, warmup=600.0)
    core = service.core
    with LiveApp(build_app(service)) as live:
        for uid, gpus in (("p1", 2), ("p2", 2), ("p3", 1)):
            assert live.schedule(uid, gpus, ["n1"], model="m") == "n1"
        shared_gpu = core.slots["p3"][0][0]
        older = next(u for u in ("p1", "p2") if any(g == shared_gpu for g, _ in core.slots[u]))
        other = "p2" if older == "p1" else "p1"
        now[0] += 5
        answer = run_round(FakeSource(4, seed=1, mem_fraction=(0.6, 0.6)), live.url, TOKEN, "n1")
        assert answer == {"node": "n1", "warming up": 2, "oom": 1}
        partner = core.jobs[older]
        assert partner.state.name == "RUNNING"
        assert partner.pred_gpu_mem_mib == pytest.approx(0.6 * 32768)   # the reading, not 8,000
        assert partner.prior_gpu_mem_mib == 8000.0 and partner.observed_at == now[0]
        assert core.jobs[other].pred_gpu_mem_mib == 8000.0                # not on the shared GPU
        core.state.check_invariants()
