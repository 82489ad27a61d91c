"""The service's /metrics, scraped by a real Prometheus server and read back through its HTTP API.

One Prometheus per module (Debian's ``prometheus`` binary, its own config and TSDB in a temp dir);
the service runs in-process on a free port, driven with filter/bind calls as kube-scheduler would."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("prometheus_client")

from support.live_app import FakeBridge, LiveApp, free_port

from dlsched.registry import make_policy
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

PROMETHEUS = shutil.which("prometheus")
TOKEN = "op-token"
PRED = {"small": (50.0, 8000.0), "big": (90.0, 30000.0)}   # percent, as the predictors give


def make_live() -> LiveService:
    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = PRED[job.model_name]

    core = SchedulerCore(make_policy("fifo", "consolidate", share=True), Store("sqlite://"), max_jobs_per_gpu=2,
                         predict=predict)
    for name in ("n1", "n2"):
        core.node_seen(NodeFacts(name, 4, "default", "", False))
    return LiveService(core, FakeBridge(), token=TOKEN, observe_after=0.0)


@pytest.fixture(scope="module")
def scraped(tmp_path_factory):
    """A service with known state, and a Prometheus that has scraped it at least twice."""
    if PROMETHEUS is None:
        pytest.skip("the prometheus binary is absent (apt-get install -y prometheus)")
    tmp = tmp_path_factory.mktemp("prom")
    service = make_live()
    live = LiveApp(build_app(service)).__enter__()
    nodes = ["n1", "n2"]
    placed = {uid: live.schedule(uid, g, nodes, model) for uid, g, model in
              (("p1", 4, "big"), ("p2", 1, "small"), ("p3", 3, "big"), ("p4", 1, "small"), ("p5", 4, "big"))}
    live.call("POST", "/api/v1/observations", {"node": "n1", "pods": [
        {"uid": "p2", "gpu_util": 70, "gpu_mem_mib": 9000}, {"uid": "p4", "gpu_util": 40, "gpu_mem_mib": 7500}]},
        token=TOKEN)
    port = free_port()
    (tmp / "prometheus.yml").write_text(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
        f"scrape_configs:\n  - job_name: dlsched\n    static_configs:\n      - targets: ['127.0.0.1:{live.port}']\n")
    log = open(tmp / "prometheus.log", "wb")  # noqa: SIM115 - closed below
    proc = subprocess.Popen([PROMETHEUS, f"--config.file={tmp / 'prometheus.yml'}",
                             f"--storage.tsdb.path={tmp / 'data'}", f"--web.listen-address=127.0.0.1:{port}"],
                            stdout=log, stderr=subprocess.STDOUT)
    prom = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            if proc.poll() is not None:
                pytest.fail(f"prometheus exited: {(tmp / 'prometheus.log').read_text()[-2000:]}")
            try:
                if len(query(prom, "dlsched_decisions_total")) and query(prom, "count_over_time(up[1m])")[0][1] >= 2:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"prometheus did not scrape in 60 s: {(tmp / 'prometheus.log').read_text()[-2000:]}")
            time.sleep(0.3)
        yield service, placed, prom
    finally:
        proc.terminate()
        proc.wait(20)
        log.close()
        live.__exit__()


def query(prom: str, expr: str) -> list[tuple[dict, float]]:
    url = f"{prom}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=5) as resp:
        body = json.loads(resp.read())
    assert body["status"] == "success", body
    return [(r["metric"], float(r["value"][1])) for r in body["data"]["result"]]


def by(prom: str, expr: str, label: str) -> dict[str, float]:
    return {m[label]: v for m, v in query(prom, expr)}


def test_the_scenario_is_what_the_metrics_describe(scraped):
    service, placed, _ = scraped
    # p1 fills n1; p2 then p3 fill n2; p4 can only share p2's GPU (predicted 8,000 MiB each); p5 waits
    assert placed["p5"] == "" and all(placed[p] for p in ("p1", "p2", "p3", "p4"))
    assert placed == {"p1": "n1", "p2": "n2", "p3": "n2", "p4": "n2", "p5": ""}
    assert service.core.slots["p4"] == [(service.core.slots["p2"][0][0], 1)]


def test_queue_gpus_and_decisions_read_back_through_prometheus(scraped):
    service, _, prom = scraped
    assert by(prom, "dlsched_queue_length", "vc") == {"default": 1.0}
    # every GPU is held, one of them by two pods
    gpus = by(prom, 'dlsched_gpus{vc="default"}', "state")
    assert gpus == {"busy": 8.0, "shared": 1.0, "free": 0.0}
    assert query(prom, "dlsched_running_pods")[0][1] == 4.0
    decisions = by(prom, "dlsched_decisions_total", "kind")
    assert decisions == {"submit": 5.0, "assume": 4.0, "bind": 4.0}
    assert by(prom, "dlsched_filter_results_total", "outcome") == {"nominated": 4.0, "waiting": 1.0,
                                                                    "re-deciding": 0.0}


def test_extender_latency_histograms_per_verb(scraped):
    _, _, prom = scraped
    counts = by(prom, "dlsched_extender_latency_seconds_count", "verb")
    assert counts == {"filter": 5.0, "bind": 4.0}
    sums = by(prom, "dlsched_extender_latency_seconds_sum", "verb")
    assert all(0 < s < 10 for s in sums.values())
    p99 = query(prom, 'histogram_quantile(0.99, dlsched_extender_latency_seconds_bucket{verb="filter"})')
    assert 0 < p99[0][1] <= 2.5


def test_predicted_against_observed_with_their_error(scraped):
    _, _, prom = scraped
    util = {(m["pod"], m["source"]): v for m, v in query(prom, "dlsched_pod_gpu_util")}
    assert util == {("default/p2", "predicted"): 50.0, ("default/p2", "observed"): 70.0,
                    ("default/p4", "predicted"): 50.0, ("default/p4", "observed"): 40.0}
    mem = {(m["pod"], m["source"]): v for m, v in query(prom, "dlsched_pod_gpu_mem_mib")}
    assert mem[("default/p2", "observed")] == 9000.0 and mem[("default/p4", "predicted")] == 8000.0
    err = by(prom, "dlsched_prediction_abs_error", "resource")
    assert err["gpu_util"] == pytest.approx((20 + 10) / 2)   # percentage points
    assert err["gpu_mem_mib"] == pytest.approx((1000 + 500) / 2)
