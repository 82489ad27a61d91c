"""The dashboard in a real headless Chromium: the rendered DOM (after the page's own script has
refreshed it from the JSON endpoint) matches the service's state; a screenshot is kept."""

from __future__ import annotations

import html
import re
import shutil
import subprocess

import pytest

pytest.importorskip("fastapi")

from support.live_app import FakeBridge, LiveApp

from dlsched.registry import make_policy
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
TOKEN = "dash-token"
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--virtual-time-budget=4000"]


def chromium(tmp_path, url: str, *args: str) -> str:
    profile = tmp_path / f"profile-{len(list(tmp_path.iterdir()))}"
    res = subprocess.run([CHROMIUM, *FLAGS, f"--user-data-dir={profile}", *args, url], capture_output=True,
                         text=True, timeout=90)
    assert res.returncode == 0, res.stderr[-2000:]
    return res.stdout


@pytest.fixture()
def live():
    if CHROMIUM is None:
        pytest.skip("chromium is absent (apt-get install -y chromium)")

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = {"small": (50.0, 8000.0), "big": (90.0, 30000.0)}[job.model_name]

    core = SchedulerCore(make_policy("fifo", "consolidate", share=True), Store("sqlite://"), max_jobs_per_gpu=2,
                         predict=predict)
    for name in ("n1", "n2"):
        core.node_seen(NodeFacts(name, 4, "default", "", False))
    service = LiveService(core, FakeBridge(), token=TOKEN, observe_after=0.0)
    with LiveApp(build_app(service)) as app:
        for uid, gpus, model in (("p1", 4, "big"), ("p2", 1, "small"), ("p3", 3, "big"), ("p4", 1, "small"),
                                 ("p5", 4, "big"), ("p6", 2, "small")):
            app.schedule(uid, gpus, ["n1", "n2"], model)
        app.call("POST", "/api/v1/observations", {"node": "n2", "pods": [
            {"uid": "p2", "gpu_util": 70, "gpu_mem_mib": 9000}]}, token=TOKEN)
        yield service, app


def cells(dom: str, table: str) -> list[list[str]]:
    body = re.search(rf'<table id="{table}">(.*?)</table>', dom, re.S).group(1)
    rows = re.findall(r"<tr[^>]*>(.*?)</tr>", body, re.S)[1:]
    return [[html.unescape(re.sub(r"<[^>]+>", "", c)) for c in re.findall(r"<td>(.*?)</td>", r, re.S)] for r in rows]


def test_dashboard_in_chromium_matches_the_service_state(live, tmp_path):
    service, app = live
    core = service.core
    dom = chromium(tmp_path, f"{app.url}/dashboard", "--dump-dom")
    # the page's script ran and redrew the page from /api/v1/dashboard
    assert re.search(r'data-refreshed="[1-9]', dom), dom[:500]
    assert '<span id="policy">fifo</span>' in dom
    # nodes x GPUs: every holder of every GPU, as the kernel has them; the shared GPU marked
    st = core.state
    for idx, node in enumerate(st.node_ids):
        block = re.search(rf'<div class="node" data-node="{node}">(.*?)</div></div></div>', dom, re.S).group(1) + "</div>"
        gpus = re.findall(r'<div class="gpu (\w+)" data-gpu="(\d+)">(.*?)</ul></div>', block, re.S)
        assert [int(g) for _, g, _ in gpus] == list(range(4))
        for cls, g, inner in gpus:
            holders = sorted(core.pods[j.job_id].key for j in st.gpu_holders(idx, int(g)))
            assert sorted(re.findall(r'data-pod="([^"]+)"', inner)) == holders
            assert cls == ("shared" if len(holders) > 1 else "busy" if holders else "free")
    shared = re.search(r'<div class="gpu shared" data-gpu="(\d+)">(.*?)</ul></div>', dom, re.S)
    assert shared and "default/p2" in shared.group(2) and "default/p4" in shared.group(2)
    assert "70%" in shared.group(2) and "9000 MiB (obs)" in shared.group(2)   # observed beats predicted
    # the queue in policy order, with predictions and the reason each waits
    queue = cells(dom, "queue")
    expected = [[q["vc"], str(q["rank"]), q["pod"], str(q["gpus"])] for q in core.queue()]
    assert [row[:4] for row in queue] == expected == [["default", "0", "default/p5", "4"],
                                                      ["default", "1", "default/p6", "2"]]
    assert queue[0][4:6] == ["90%", "30000"] and "queued by dlsched (fifo)" in queue[0][6]
    # the ETA column, drawn by the script: FIFO pods carry no prediction, so each running pod's
    # default hour is ahead of p5 (its ETA is about an hour away, never "–")
    assert re.fullmatch(r"in (5\d|60) min", queue[0][7]), queue[0]
    # the decision log, newest first, with reasons
    log = core.store.decision_log(1000)
    rows = cells(dom, "decisions")
    assert [int(r[0]) for r in rows] == [d["id"] for d in reversed(log)]
    assert [r[1] for r in rows].count("assume") == 4 and any("policy=fifo" in r[5] for r in rows)
    # predicted vs observed
    assert cells(dom, "pvo") == [["default/p2", "50%", "70%", "8000", "9000"]]
    # the extender's answers, newest first: why the other node was rejected, why p5/p6 wait
    answers = cells(dom, "filters")
    assert [r[:2] for r in answers] == [["default/p6", "waiting"], ["default/p5", "waiting"],
                                        ["default/p4", "nominated"], ["default/p3", "nominated"],
                                        ["default/p2", "nominated"], ["default/p1", "nominated"]]
    assert answers[2][2:] == ["n2", "1", "dlsched (fifo) nominated n2 for this pod"]
    assert answers[0][3] == "2" and answers[0][4].startswith("queued by dlsched (fifo): 1 of 2 pending")


def test_dashboard_refreshes_and_screenshot(live, tmp_path):
    service, app = live
    # a change after the page was served shows up through the script's refresh
    app.call("POST", "/api/v1/observations", {"node": "n2", "pods": [
        {"uid": "p4", "gpu_util": 20, "gpu_mem_mib": 5000}]}, token=TOKEN)
    dom = chromium(tmp_path, f"{app.url}/dashboard", "--dump-dom")
    assert ["default/p4", "50%", "20%", "8000", "5000"] in cells(dom, "pvo")
    shot = tmp_path / "dashboard.png"
    chromium(tmp_path, f"{app.url}/dashboard", f"--screenshot={shot}", "--window-size=1400,1000")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000


def test_server_rendered_page_without_script(live):
    """Without JavaScript the page is already complete (server-rendered)."""
    service, app = live
    page = app.call("GET", "/dashboard")
    assert "default/p5" in page and 'class="gpu shared"' in page and "<script>" in page
    data = app.call("GET", "/api/v1/dashboard")
    assert [q["pod"] for q in data["queue"]] == ["default/p5", "default/p6"]
    assert data["queue"][0]["pred_mem_mib"] == 30000.0
