"""What forwarding costs: the same repeated filter (100 node names) answered by the leader directly
and through a follower that forwards it (two in-process servers on loopback, 400 calls each, twice).

    PYTHONPATH=src .venv/bin/python benchmarks/bench_follower.py
"""

from __future__ import annotations

import http.client
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from support.live_app import FakeBridge, LiveApp, pod_json

from dlsched.registry import make_policy
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.follower import LeaderGate
from dlsched.service.pods import NodeFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

CALLS = 400


def service() -> LiveService:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"))
    for i in range(100):
        core.node_seen(NodeFacts(f"n{i}", 8, "default", "", False))
    svc = LiveService(core, FakeBridge(), token="t")
    svc.started = True
    return svc


class FollowerView:
    """An elector as a follower sees it: not leading, the leader at ``url``."""

    identity, is_leader = "F", False

    def __init__(self, url: str) -> None:
        self.url = url

    def leader(self) -> tuple[str, str]:
        return "L", self.url

    def status(self) -> dict:
        return {"identity": self.identity, "is_leader": False, "leader": "L", "leader_url": self.url}


def latencies(port: int, body: bytes) -> tuple[float, float]:
    conn = http.client.HTTPConnection("127.0.0.1", port)
    lat = []
    for _ in range(CALLS):
        t0 = time.perf_counter()
        conn.request("POST", "/scheduler/filter", body, {"Content-Type": "application/json"})
        resp = conn.getresponse()
        resp.read()
        assert resp.status == 200
        lat.append((time.perf_counter() - t0) * 1000)
    lat.sort()
    return statistics.median(lat), lat[int(0.99 * len(lat))]


def main() -> None:
    with LiveApp(build_app(service())) as leader:
        follower = service()
        follower.elector = FollowerView(leader.url)
        with LiveApp(LeaderGate(build_app(follower), follower)) as front:
            body = json.dumps({"Pod": pod_json("p1", 2), "NodeNames": [f"n{i}" for i in range(100)]}).encode()
            for name, app in (("direct", leader), ("forwarded", front)) * 2:
                p50, p99 = latencies(app.port, body)
                print(f"{name:10s} p50 {p50:.2f} ms  p99 {p99:.2f} ms")


if __name__ == "__main__":
    main()
