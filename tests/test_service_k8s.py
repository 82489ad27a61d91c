"""End to end with a real control plane (etcd + kube-apiserver + kube-scheduler v1.20.2 from
../shared/k8s), in both modes (``support/modes.py``): GPU pods scheduled by kube-scheduler through
dlsched's extender, and pods of ``schedulerName: dlsched`` bound by ``serve --mode scheduler``.

One control plane serves the module (both modes, one after the other). Pods are created faster than they fit; a pod that has been
bound for a moment is deleted (its job "finished"), which frees its GPUs for the next ones. The
checks: every pod is bound on the node dlsched nominated, with the GPUs it annotated; no two pods
bound at the same time ever share a GPU; FIFO nominates in arrival order and QSSF does not; after
``kill -9`` and a restart every pod still ends bound exactly once with no GPU slot used twice.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("kubernetes")

from support.control_plane import add_gpu_node, extender_control_plane, gpu_pod  # noqa: E402
from support.modes import for_mode, mode_fixture, service  # noqa: E402, F401 - the mode fixture
from support.service_proc import ServiceProcess  # noqa: E402

NODES, GPUS_PER_NODE = 6, 8
HOLD = 0.5          # seconds a bound pod "runs" before the test deletes it
# The restart and failover tests run without the ETA timer: its dlsched.io/eta patches of pending
# pods are pod updates, which move them out of kube-scheduler's unschedulable queue as a nudge
# does. Before the fix (0ecc9b7) they alone bound the parked pods within 5 s of a restart (the
# restarted process's first ETAs); in the reported run the pods had ETAs already and waited for
# the 60-s flush. Without them, only the restarted service's nudges can bind the parked pods.
NO_ETA = ("--eta-interval", "0")


@pytest.fixture(scope="module")
def cluster(shared, tmp_path_factory):
    with extender_control_plane(shared) as (cp, port):
        for i in range(NODES):
            add_gpu_node(cp, f"gpu-{i}", GPUS_PER_NODE)
        yield cp, port, tmp_path_factory.mktemp("service")


def _sizes(n: int, seed: int) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(1, 8) for _ in range(n)]


class Workload:
    """Creates pods, deletes them after HOLD seconds bound, and checks GPU overlaps as it goes."""

    def __init__(self, cp, tag: str, sizes: list[int], mode: str = "extender") -> None:
        self.cp, self.tag, self.sizes, self.mode = cp, tag, sizes, mode
        self.bound: dict[str, dict] = {}       # pod name -> {node, gpus, uid, at}
        self.deleted: set[str] = set()
        self.overlaps: list[str] = []
        self.created = 0
        self.hold = False   # True: bound pods are not deleted (no cluster event makes kube-scheduler retry)

    def create(self, gap: float = 0.0) -> None:
        for i, gpus in enumerate(self.sizes):
            status, body = self.cp.request("POST", "/api/v1/namespaces/default/pods",
                                           for_mode(self.mode, gpu_pod(f"{self.tag}-{i:03d}", gpus, self.tag)))
            assert status == 201, body
            self.created += 1
            if gap:
                time.sleep(gap)

    def poll(self) -> None:
        status, listing = self.cp.request("GET", f"/api/v1/namespaces/default/pods?labelSelector=run%3D{self.tag}")
        assert status == 200
        held: dict[str, dict[int, str]] = defaultdict(dict)
        now = time.monotonic()
        for pod in listing["items"]:
            meta, node = pod["metadata"], pod["spec"].get("nodeName")
            if not node:
                continue
            name = meta["name"]
            text = (meta.get("annotations") or {}).get("dlsched.io/gpus", "")
            gpus = [int(g) for g in text.split(",") if g]
            rec = self.bound.setdefault(name, {"node": node, "gpus": gpus, "uid": meta["uid"], "at": now})
            assert (rec["node"], rec["gpus"]) == (node, gpus), f"{name} moved"
            for g in gpus:
                if g in held[node]:
                    self.overlaps.append(f"{node} GPU {g}: {held[node][g]} and {name}")
                held[node][g] = name
            if now - rec["at"] >= HOLD and name not in self.deleted and not self.hold:
                st, _ = self.cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
                assert st in (200, 404)
                self.deleted.add(name)

    def done(self) -> bool:
        return self.created == len(self.sizes) and len(self.deleted) == len(self.sizes)

    def run(self, timeout: float, during=None) -> None:
        deadline = time.monotonic() + timeout
        while not self.done():
            assert time.monotonic() < deadline, (f"{len(self.bound)} of {len(self.sizes)} pods bound after "
                                                 f"{timeout} s")
            self.poll()
            if during is not None:
                during(self)
            time.sleep(0.1)


def _nudge(cp) -> None:
    """Touch a node: kube-scheduler retries unschedulable pods at once (instead of after ~60 s)."""
    cp.request("PATCH", "/api/v1/nodes/gpu-0", {"metadata": {"labels": {"nudge": str(time.monotonic_ns())}}},
               content_type="application/strategic-merge-patch+json")


def nomination_to_bind(decisions: list[dict], since: float) -> list[float]:
    """Seconds from each pod's last nomination (``assume``) to its ``bind``, for binds after
    ``since`` (wall time): with kube-scheduler's 2-s backoff a pod parked as unschedulable until
    its 60-s flush shows here as a wait of a minute."""
    last: dict[str, float] = {}
    waits = []
    for d in sorted(decisions, key=lambda d: d["id"]):
        if d["kind"] == "assume":
            last[d["pod_uid"]] = d["at"]
        elif d["kind"] in ("bind", "confirm") and d["at"] > since and d["pod_uid"] in last:
            # the bind, or the watch's confirm when it came first: whichever is logged first
            waits.append(d["at"] - max(last.pop(d["pod_uid"]), since))
    return waits


def _check_bound_as_decided(work: Workload, decisions: list[dict]) -> dict[str, list[dict]]:
    by_pod: dict[str, list[dict]] = defaultdict(list)
    for d in decisions:
        by_pod[d["pod"].rpartition("/")[2]].append(d)
    for name, rec in work.bound.items():
        log = by_pod[name]
        binds = [d for d in log if d["kind"] in ("bind", "confirm", "adopt")]   # adopt: bound, then a crash
        assert len([d for d in log if d["kind"] == "bind"]) <= 1, f"{name} bound twice: {log}"
        assert binds, f"{name} was bound without a dlsched bind: {log}"
        assumes = [d for d in log if d["kind"] == "assume" and d["id"] < binds[0]["id"]]
        assert assumes, f"{name}: no nomination before its bind"
        last = assumes[-1]
        assert (last["node"], last["gpus"]) == (rec["node"], ",".join(map(str, rec["gpus"]))), (name, last, rec)
    return by_pod


def _first_assume_order(by_pod: dict[str, list[dict]]) -> list[str]:
    firsts = {name: min(d["id"] for d in log if d["kind"] == "assume") for name, log in by_pod.items()
              if any(d["kind"] == "assume" for d in log)}
    return sorted(firsts, key=firsts.get)


def _settled(svc: ServiceProcess, timeout: float = 20.0) -> dict:
    """The service's state once the watch has delivered the last deletions."""
    deadline = time.monotonic() + timeout
    while True:
        state = svc.get("/api/v1/state")
        if (state["running"], state["pending"]) == (0, 0) or time.monotonic() > deadline:
            return state
        time.sleep(0.2)


def _run_policy(cluster, mode: str, policy: str, tag: str, sizes: list[int]) -> tuple[Workload, dict]:
    cp, port, tmp = cluster
    tag = f"{tag}-{mode[:3]}"
    svc = service(mode, port, cp.api_url, cp.token, f"sqlite:///{tmp}/{tag}.db", policy, tmp / f"{tag}.log")
    svc.start()
    try:
        work = Workload(cp, tag, sizes, mode)
        work.create()
        work.run(timeout=240)
        state = _settled(svc)
        decisions = svc.decisions()
    finally:
        svc.stop()
    assert not work.overlaps, work.overlaps[:5]
    assert len(work.bound) == len(sizes)
    by_pod = _check_bound_as_decided(work, decisions)
    assert state["running"] == 0 and state["pending"] == 0, state
    return work, by_pod


def test_fifo_and_qssf_schedule_every_pod_through_dlsched_in_their_own_order(cluster, mode):
    sizes = _sizes(50, seed=3)
    _, fifo = _run_policy(cluster, mode, "fifo", "fifo", sizes)
    _, qssf = _run_policy(cluster, mode, "qssf", "qssf", sizes)
    fifo_order = [int(n.rpartition("-")[2]) for n in _first_assume_order(fifo)]
    qssf_order = [int(n.rpartition("-")[2]) for n in _first_assume_order(qssf)]
    assert fifo_order == sorted(fifo_order) == list(range(50))     # first come, first nominated
    assert qssf_order != fifo_order
    # QSSF's key is GPUs x expected duration: while pods queue, the small ones go first
    first = 25
    assert sum(sizes[i] for i in qssf_order[:first]) < sum(sizes[i] for i in fifo_order[:first])


def test_kill9_while_pods_stream_in_then_restart(cluster, mode):
    cp, port, tmp = cluster
    sizes = _sizes(40, seed=11)
    tag = f"crash-{mode[:3]}"
    db = f"sqlite:///{tmp}/{tag}.db"
    svc = service(mode, port, cp.api_url, cp.token, db, "fifo", tmp / f"{tag}.log", *NO_ETA).start()
    work = Workload(cp, tag, sizes, mode)
    creator = threading.Thread(target=work.create, kwargs={"gap": 0.1})
    creator.start()
    state = {"killed": False, "restarted": False}

    def crash_once(w: Workload) -> None:
        # no node is touched to make kube-scheduler retry the pods it parked while the extender was
        # down (refused connections): the restarted service's nudges must do it (issue 33, point 3);
        # in scheduler mode nothing waits in kube-scheduler: the restarted service's first pass binds
        if not state["killed"] and len(w.bound) >= 8:
            svc.kill9()
            state["killed"] = True
            state["created_at_kill"] = w.created
            # room for the pending pods at once, while the extender is down (their retries are
            # refused and kube-scheduler parks them), then no pod is deleted until the restarted
            # service's first bind: no cluster event makes kube-scheduler retry them, its nudges must
            w.hold = True
            for name in [n for n in w.bound if n not in w.deleted]:
                cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
                w.deleted.add(name)
            state["bound_at_kill"] = len(w.bound)
            creator.join()          # every pod created while the extender is down (none after the restart)
            time.sleep(6.0)         # their retries are refused; with a 2-s backoff all are parked
            svc.start()
            state["ready_wall"], state["ready_t"] = time.time(), time.monotonic()
            state["restarted"] = True
        elif w.hold and state["restarted"] and (len(w.bound) > state["bound_at_kill"]
                                               or time.monotonic() - state["ready_t"] > 90):
            w.hold = False   # the first bind after the restart (or the flush's time): churn again
    try:
        work.run(timeout=240, during=crash_once)
        creator.join()
        rows = _settled(svc)
        decisions = svc.decisions()
    finally:
        creator.join()
        svc.stop()
    assert state["restarted"] and state["created_at_kill"] < len(sizes)   # killed while pods streamed in
    assert not work.overlaps, work.overlaps[:5]
    assert len(work.bound) == len(sizes)                      # nothing lost
    _check_bound_as_decided(work, decisions)                  # each bound once, where dlsched said
    assert rows["running"] == 0 and rows["pending"] == 0
    binds = sorted(d["at"] for d in decisions if d["kind"] == "bind" and d["at"] > state["ready_wall"])
    waits = nomination_to_bind(decisions, state["ready_wall"])
    print(f"\nrestart: first bind {binds[0] - state['ready_wall']:.2f} s after the restarted service was ready; "
          f"nomination -> bind of {len(waits)} pods: max {max(waits):.2f} s")
    # within kube-scheduler's pod backoff (2 s), never its 60-s unschedulable flush
    assert binds[0] - state["ready_wall"] <= 5.0
    assert max(waits) <= 10.0, sorted(waits)[-5:]


def test_a_restarted_service_nudges_the_pods_kube_scheduler_parked_while_it_was_down(cluster, mode):
    """Issue 33, point 3: the service is killed, the cluster frees room while the extender is down
    (kube-scheduler retries the pending pods, the calls are refused, it parks them as
    unschedulable), then the service restarts. Nothing else happens in the cluster: the pods bind
    only if the restarted service nudges them, within the 2-s backoff, not after the 60-s flush.
    In scheduler mode the same room freed while dlsched is down is used by its first pass after
    the restart (from the listing), within the same limits."""
    cp, port, tmp = cluster
    tag = f"restart-{mode[:3]}"
    svc = service(mode, port, cp.api_url, cp.token, f"sqlite:///{tmp}/{tag}.db", "fifo", tmp / f"{tag}.log", *NO_ETA).start()
    work = Workload(cp, tag, [GPUS_PER_NODE] * (2 * NODES), mode)
    try:
        work.hold = True
        work.create()
        deadline = time.monotonic() + 120
        while len(work.bound) < NODES:
            assert time.monotonic() < deadline, f"{len(work.bound)} of {NODES} pods bound before the kill"
            work.poll()
            time.sleep(0.1)
        svc.kill9()
        for name in list(work.bound):      # room for the other pods, with no extender to place them
            st, _ = cp.request("DELETE", f"/api/v1/namespaces/default/pods/{name}?gracePeriodSeconds=0")
            assert st == 200
            work.deleted.add(name)
        time.sleep(6.0)                     # their retries are refused; with a 2-s backoff all are parked
        restarted = time.time()
        svc.start()
        ready = time.time()   # in scheduler mode the first pass may bind before the HTTP server answers
        deadline = time.monotonic() + 100
        while len(work.bound) < 2 * NODES and time.monotonic() < deadline:
            work.poll()
            time.sleep(0.1)
        decisions = svc.decisions()
    finally:
        svc.stop()
        for i in range(2 * NODES):
            cp.request("DELETE", f"/api/v1/namespaces/default/pods/{tag}-{i:03d}?gracePeriodSeconds=0")
    first: dict[str, float] = {}   # pod -> its bind, or the watch's confirm when it came first
    for d in decisions:
        if d["kind"] in ("bind", "confirm") and d["at"] > restarted:
            first.setdefault(d["pod"], d["at"])
    binds = sorted(first.values())
    assert len(work.bound) == 2 * NODES, f"{len(work.bound) - NODES} of {NODES} pods bound after the restart"
    print(f"\nrestart with parked pods: {len(binds)} bound, the first {binds[0] - ready:.2f} s and the last "
          f"{binds[-1] - ready:.2f} s after the restarted service was ready")
    assert not work.overlaps, work.overlaps[:5]
    assert len(binds) == NODES and binds[0] - ready <= 5.0 and binds[-1] - ready <= 10.0


def test_operator_api_submits_a_job_that_kube_scheduler_binds_through_dlsched(cluster, mode):
    import json
    import urllib.error
    import urllib.request

    cp, port, tmp = cluster
    job = f"op-job-{mode[:3]}"
    svc = service(mode, port, cp.api_url, cp.token, f"sqlite:///{tmp}/operator-{mode}.db", "fifo",
                  tmp / f"operator-{mode}.log").start()
    try:
        def post(body: dict, token: str | None) -> tuple[int, dict]:
            req = urllib.request.Request(svc.url + "/api/v1/jobs", data=json.dumps(body).encode(), method="POST",
                                         headers={"Content-Type": "application/json"})
            if token:
                req.add_header("Authorization", f"Bearer {token}")
            try:
                with urllib.request.urlopen(req, timeout=30) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as exc:
                return exc.code, json.loads(exc.read())

        assert post({"name": job, "gpus": 3}, None)[0] == 403
        status, created = post({"name": job, "gpus": 3, "vc": "default"}, svc.token)
        assert status == 201, created
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            _, pod = cp.request("GET", f"/api/v1/namespaces/default/pods/{job}")
            if pod["spec"].get("nodeName"):
                break
            time.sleep(0.2)
        assert pod["spec"].get("nodeName"), "the submitted job was never bound"
        assert pod["metadata"]["uid"] == created["uid"]
        assert len(pod["metadata"]["annotations"]["dlsched.io/gpus"].split(",")) == 3
        assert post({"name": job, "gpus": 3}, svc.token)[0] == 422     # the name is taken
        cp.request("DELETE", f"/api/v1/namespaces/default/pods/{job}?gracePeriodSeconds=0")
    finally:
        svc.stop()
