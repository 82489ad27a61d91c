"""Leader election on a real kube-apiserver (v1.20.2 from ../shared/k8s): a Lease is acquired,
renewed, taken over after its holder stops renewing, released on a graceful stop, won by exactly
one of several replicas racing for it (resourceVersion conflicts), and a replica that lost it
nominates and binds nothing. Then two in-process replicas behind the HTTP gate: the follower
forwards extender and operator calls to the leader, and takes over when the leader dies.

Short timings (lease 3 s, renew deadline 2 s, retry 0.25 s) keep the module fast.
"""

from __future__ import annotations

import threading
import time
import urllib.error
import urllib.request

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import extender_control_plane
from support.live_app import FakeBridge, LiveApp, free_port, pod_json

from dlsched.registry import make_policy
from dlsched.service.app import build_app
from dlsched.service.core import SchedulerCore
from dlsched.service.follower import LeaderGate
from dlsched.service.kube import make_api
from dlsched.service.leader import LeaderElector, LeaseLock, LeaseRecord
from dlsched.service.pods import NodeFacts, pod_facts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

LEASE, RENEW, RETRY = 3.0, 2.0, 0.25
LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


@pytest.fixture(scope="module")
def apiserver(shared):
    from kubernetes import client

    with extender_control_plane(shared) as (cp, _port):
        yield cp, client.CoordinationV1Api(make_api(kubeconfig=str(cp.kubeconfig())).api_client)


def _elector(coord, lease: str, who: str, **kw) -> LeaderElector:
    return LeaderElector(LeaseLock(coord, "default", lease), who, f"http://{who}.invalid:1", LEASE, RENEW, RETRY,
                         **kw)


def _until(cond, timeout: float) -> float:
    """Seconds until ``cond()`` held; fails after ``timeout``."""
    t0 = time.monotonic()
    while not cond():
        assert time.monotonic() - t0 < timeout, f"not within {timeout} s"
        time.sleep(0.02)
    return time.monotonic() - t0


def test_acquire_renew_expiry_takeover_and_release(apiserver):
    cp, coord = apiserver
    started = {"a": 0, "b": 0, "c": 0}
    a = _elector(coord, "one", "a", on_started=lambda: started.__setitem__("a", started["a"] + 1))
    b = _elector(coord, "one", "b", on_started=lambda: started.__setitem__("b", started["b"] + 1))
    c = _elector(coord, "one", "c", on_started=lambda: started.__setitem__("c", started["c"] + 1))
    a.start()
    _until(lambda: a.is_leader, 3 * RETRY + 2)
    status, lease = cp.request("GET", f"{LEASES}/one")
    assert status == 200, lease
    assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["leaseDurationSeconds"] == 3
    assert lease["spec"].get("leaseTransitions", 0) == 0
    assert lease["metadata"]["annotations"]["dlsched.io/leader-url"] == "http://a.invalid:1"
    first_renew = lease["spec"]["renewTime"]
    b.start()
    c.start()
    try:
        time.sleep(2 * LEASE)                       # two lease durations: a renews, nobody else takes it
        assert a.is_leader and not b.is_leader and not c.is_leader
        assert b.leader() == c.leader() == ("a", "http://a.invalid:1")
        _, lease = cp.request("GET", f"{LEASES}/one")
        assert lease["spec"]["holderIdentity"] == "a" and lease["spec"]["renewTime"] > first_renew
        assert started == {"a": 1, "b": 0, "c": 0}

        a.stop(release=False)                       # a crash: the lease is left to expire
        killed = time.monotonic()
        _until(lambda: b.is_leader or c.is_leader, LEASE + 4 * RETRY + 2)
        took = time.monotonic() - killed
        assert took >= LEASE - RENEW - RETRY        # waited for the expiry, did not grab a live lease
        new, other = (b, c) if b.is_leader else (c, b)
        _, lease = cp.request("GET", f"{LEASES}/one")
        assert lease["spec"]["holderIdentity"] == new.identity and lease["spec"]["leaseTransitions"] == 1
        assert started[new.identity] == 1 and started[other.identity] == 0 and not a.is_leader
        _until(lambda: other.leader()[0] == new.identity, 4 * RETRY + 1)

        new.stop(release=True)                      # graceful: the holder is emptied, no expiry to wait for
        released = time.monotonic()
        _until(lambda: other.is_leader, 4 * RETRY + 1.5)
        assert time.monotonic() - released < LEASE - 0.5
        _, lease = cp.request("GET", f"{LEASES}/one")
        assert lease["spec"]["holderIdentity"] == other.identity and lease["spec"]["leaseTransitions"] == 2
    finally:
        for e in (a, b, c):
            e.stop(release=False)


def test_replicas_racing_for_a_lease_exactly_one_wins(apiserver):
    cp, coord = apiserver
    # a lease nobody holds yet: every replica tries to create it at once
    racers = [_elector(coord, "race", f"r{i}") for i in range(6)]
    barrier = threading.Barrier(len(racers))
    won: list[str] = []

    def race(e: LeaderElector) -> None:
        barrier.wait()
        if e.try_acquire_or_renew():
            won.append(e.identity)

    threads = [threading.Thread(target=race, args=(e,)) for e in racers]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1
    holder = next(e for e in racers if e.identity == won[0])
    # the holder renews once more, everyone else sees that record, then it stops renewing
    assert holder.try_acquire_or_renew()
    for e in racers:
        if e is not holder:
            assert not e.try_acquire_or_renew()
    time.sleep(LEASE + 0.2)
    won.clear()
    rest = [e for e in racers if e is not holder]
    barrier = threading.Barrier(len(rest))
    threads = [threading.Thread(target=race, args=(e,)) for e in rest]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    again = list(won)
    assert len(again) == 1 and again[0] != holder.identity
    _, lease = cp.request("GET", f"{LEASES}/race")
    assert lease["spec"]["holderIdentity"] == again[0] and lease["spec"]["leaseTransitions"] == 1


def test_a_write_at_a_stale_resource_version_is_refused(apiserver):
    _, coord = apiserver
    lock = LeaseLock(coord, "default", "stale")
    created = lock.write(LeaseRecord("x", "http://x.invalid:1", 3, 0))
    assert created is not None and created.holder == "x"
    # someone else renews it meanwhile
    renewed = lock.write(LeaseRecord("y", "http://y.invalid:1", 3, 1, resource_version=created.resource_version))
    assert renewed is not None and renewed.resource_version != created.resource_version
    # a write based on the version read before is refused (409), and changes nothing
    assert lock.write(LeaseRecord("x", "http://x.invalid:1", 3, 0, resource_version=created.resource_version)) is None
    assert lock.write(LeaseRecord("z", "", 3, 0)) is None          # create of an existing lease: 409 too
    assert lock.get().holder == "y"


def _service(**kw) -> LiveService:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"))
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    return LiveService(core, kw.pop("bridge", FakeBridge()), token="t", **kw)


def test_a_replica_that_lost_the_lease_nominates_and_binds_nothing(apiserver):
    cp, coord = apiserver
    service = _service(bridge=None)
    lost = threading.Event()
    elector = _elector(coord, "lost", "me", on_started=service.start, on_stopped=lost.set)
    service.attach_elector(elector)
    core = service.core
    core.pod_seen(pod_facts(pod_json("p1", 2)))
    assert core.run_pass() == 0 and not service.leading()        # not leader yet: nothing nominated
    elector.start()
    try:
        _until(service.leading, 3 * RETRY + 2)
        passed, _ = core.verdict(pod_facts(pod_json("p1", 2)), ["n1"])
        assert passed == ["n1"]                                   # the leader nominates
        # another replica takes the lease (e.g. after a network partition that it saw as an expiry)
        for _ in range(20):    # at the version just read: retried when a renewal came in between (409)
            _, lease = cp.request("GET", f"{LEASES}/lost")
            lease["spec"].update(holderIdentity="other", leaseDurationSeconds=60)
            status, _ = cp.request("PUT", f"{LEASES}/lost", lease)
            if status == 200:
                break
        assert status == 200
        took = _until(lambda: not elector.is_leader, RENEW + 2 * RETRY + 1)
        assert took <= RENEW + 2 * RETRY + 1 and lost.wait(5)
        assert not service.leading()
        assert elector.leader()[0] == "other"
        # a new pod is not nominated: its VC stays marked for when this replica leads again
        core.pod_seen(pod_facts(pod_json("p2", 1, created="2026-01-01T00:00:01Z")))
        assert core.run_pass() == 0
        passed, _ = core.verdict(pod_facts(pod_json("p2", 1, created="2026-01-01T00:00:01Z")), ["n1"])
        assert passed == [] and "p2" not in {r["pod_uid"] for r in core.store.assignment_rows()}
        # the pod nominated while leading is not bound: the bind is refused before the API server
        assert "does not hold the leader lease" in service.bind("default", "p1", "p1", "n1")
        assert service.stats == {"binds": 0, "bind_failures": 0}
    finally:
        elector.stop(release=False)


class _Reconciling(FakeBridge):
    """A bridge whose start-up finds nothing (an empty cluster) and whose watches do nothing."""

    def reconcile(self):
        return "", "", set()

    def start(self, node_rv: str, pod_rv: str) -> None:
        pass


def _post(url: str, path: str, body: bytes, headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url + path, data=body, method="POST",
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def test_the_follower_forwards_to_the_leader_and_takes_over_when_it_dies(apiserver):
    import json

    _, coord = apiserver
    replicas = {}
    for who in ("lead", "follow"):
        port = free_port()
        service = _service(bridge=_Reconciling())
        elector = LeaderElector(LeaseLock(coord, "default", "gate"), who, f"http://127.0.0.1:{port}", LEASE, RENEW,
                                RETRY, on_started=service.start)
        service.attach_elector(elector)
        replicas[who] = (service, elector, LiveApp(LeaderGate(build_app(service), service), port))
    lead, follow = replicas["lead"], replicas["follow"]
    with lead[2] as lead_app, follow[2] as follow_app:
        lead[1].start()
        _until(lead[0].leading, 3 * RETRY + 2)
        follow[1].start()
        _until(lambda: follow[1].leader()[0] == "lead", 4 * RETRY + 1)
        try:
            filt = json.dumps({"Pod": pod_json("p1", 2), "NodeNames": ["n1"]}).encode()
            status, body = _post(follow_app.url, "/scheduler/filter", filt)
            assert status == 200 and json.loads(body)["NodeNames"] == ["n1"]
            assert "p1" in lead[0].core.jobs and "p1" not in follow[0].core.jobs   # decided by the leader
            bind = json.dumps({"PodName": "p1", "PodNamespace": "default", "PodUID": "p1", "Node": "n1"}).encode()
            assert _post(follow_app.url, "/scheduler/bind", bind) == (200, b'{"Error":""}')
            assert lead[0].bridge.binds == [("default", "p1", "p1", "n1", (0, 1))] and follow[0].bridge.binds == []
            state = follow_app.call("GET", "/api/v1/state")                  # the operator reads the leader's
            assert state["leadership"]["identity"] == "lead" and state["leadership"]["is_leader"] is True
            assert state["running"] == 1
            mine = follow_app.call("GET", "/api/v1/leader")                  # each replica's own view
            assert (mine["identity"], mine["is_leader"], mine["leader"]) == ("follow", False, "lead")
            assert mine["calls_forwarded"] == 3
            metrics = follow_app.call("GET", "/metrics")
            assert 'dlsched_leader{identity="follow"} 0.0' in metrics
            assert 'dlsched_leader_seen{leader="lead"} 1.0' in metrics
            assert 'dlsched_leader{identity="lead"} 1.0' in lead_app.call("GET", "/metrics")
            # a call already forwarded once is not forwarded again
            status, body = _post(follow_app.url, "/scheduler/filter", filt, {"X-Dlsched-Forwarded-By": "x"})
            assert status == 503 and b"does not lead" in body

            lead[1].stop(release=False)                   # the leader dies: its lease is left to expire
            died = time.monotonic()
            lead_app.server.should_exit = True
            status, body = _post(follow_app.url, "/scheduler/filter", filt)
            assert status == 503                          # the leader is unreachable: kube-scheduler retries
            took = _until(follow[0].leading, LEASE + 4 * RETRY + 2)
            assert time.monotonic() - died <= LEASE + 4 * RETRY + 2
            status, body = _post(follow_app.url, "/scheduler/filter", filt)
            assert status == 200 and json.loads(body)["NodeNames"] == ["n1"]   # decided by the new leader
            assert "p1" in follow[0].core.jobs
            print(f"takeover {took:.2f} s after the leader stopped renewing (lease {LEASE} s)")
        finally:
            lead[1].stop(release=False)
            follow[1].stop(release=False)


PG = "postgresql+psycopg://u:p@127.0.0.1:1/db"


@pytest.mark.parametrize("args, message", [
    (["--db", "sqlite:///x.db"], "--leader-elect needs a store every replica shares: --db sqlite:///x.db"),
    (["--db", PG, "--retry-period", "0"], "--retry-period must be > 0 seconds, got 0.0"),
    (["--db", PG, "--retry-period", "8"], "--renew-deadline (7.0 s) must be longer than --retry-period (8.0 s)"),
    (["--db", PG, "--renew-deadline", "12"], "--lease-duration (10.0 s) must be longer than --renew-deadline"),
    (["--db", PG, "--host", "0.0.0.0"], "--leader-elect with --host 0.0.0.0: give --advertise-url"),
    (["--db", PG, "--advertise-url", "10.0.0.1:8888"], "--advertise-url: '10.0.0.1:8888' is not an http://"),
])
def test_bad_leader_election_options_are_one_error_line(args, message):
    from typer.testing import CliRunner

    from dlsched.cli import main

    res = CliRunner().invoke(main.app, ["serve", "--leader-elect", "--api-server", "https://127.0.0.1:1", *args])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and message in lines[-1], res.output
    assert "Traceback" not in res.output
