"""Issue 33, points 3-5, without a control plane: the write fence of a replica past its renew
deadline (one door for every API write, and the Lease's own check), the nudge of pods this
process never answered (seen at start-up or when it became leader), and the writes left out for
pods that are nominated or bound (queued nudges, ETA annotations of pods about to start)."""

from __future__ import annotations

import math

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy
from dlsched.service.core import NUDGE_AGAIN_S, SchedulerCore
from dlsched.service.eta import EtaAnnotator
from dlsched.service.kube import FencedApi, NotLeader
from dlsched.service.leader import LeaderElector, LeaseRecord
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store


class Clock:
    """A settable clock; ``later``: steps taken right after the next reading (the process stops there)."""

    def __init__(self, t: float = 1000.0) -> None:
        self.t = t
        self.later: list[float] = []

    def __call__(self) -> float:
        value = self.t
        if self.later:
            self.t += self.later.pop(0)
        return value


class Api:
    """Counts the calls that reach it."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def patch_namespaced_pod(self, *a, **kw):
        self.calls.append("patch_namespaced_pod")
        return "patched"

    def create_namespaced_pod_binding(self, *a, **kw):
        self.calls.append("create_namespaced_pod_binding")
        return "bound"

    def list_node(self, *a, **kw):
        self.calls.append("list_node")
        return "nodes"


def test_the_fence_sends_writes_only_while_the_replica_leads_and_reads_always():
    api, leads = Api(), [True]
    fenced = FencedApi(api, lambda: leads[0])
    assert fenced.patch_namespaced_pod("p", "ns", []) == "patched"
    leads[0] = False
    with pytest.raises(NotLeader, match="create_namespaced_pod_binding not sent"):
        fenced.create_namespaced_pod_binding("p", "ns", {})
    with pytest.raises(NotLeader):
        fenced.patch_namespaced_pod("p", "ns", [])
    assert fenced.list_node() == "nodes"                       # reads are not fenced
    assert api.calls == ["patch_namespaced_pod", "list_node"]
    assert fenced.refused == {"create_namespaced_pod_binding": 1, "patch_namespaced_pod": 1}


class PausingLock:
    """A Lease held by ``holder``; ``get`` may be slow (``slow`` s) or be followed by a stop (``pause`` s)."""

    namespace, name, timeout = "default", "lease", 1.0

    def __init__(self, clock: Clock, holder: str) -> None:
        self.clock, self.pause, self.slow = clock, 0.0, 0.0
        self.rec = LeaseRecord(holder, "", 10, 0, "t0", "t0", "1")
        self.writes: list[LeaseRecord] = []

    def get(self) -> LeaseRecord:
        self.clock.t += self.slow                # a slow answer is not a stop
        if self.pause:
            self.clock.later.append(self.pause)   # stopped right after the read
        return self.rec

    def write(self, rec: LeaseRecord) -> LeaseRecord:
        self.writes.append(rec)
        self.rec = LeaseRecord(rec.holder, rec.url, rec.duration, rec.transitions, rec.acquire_time,
                               rec.renew_time, str(int(self.rec.resource_version) + 1))
        return self.rec


def test_no_lease_write_after_the_renew_deadline_or_after_a_stop_between_read_and_write():
    clock = Clock()
    lock = PausingLock(clock, "me")
    el = LeaderElector(lock, "me", lease_duration=10, renew_deadline=7, retry_period=1, clock=clock)
    assert el.try_acquire_or_renew() and el.is_leader and len(lock.writes) == 1   # renewed in time
    clock.t += 8.0                                          # SIGSTOP past the renew deadline
    assert not el.try_acquire_or_renew() and not el.is_leader
    assert len(lock.writes) == 1 and el.stale_writes_skipped == 1
    # a candidate (never leader) whose process stood still between its read and its write
    other = PausingLock(clock, "")
    cand = LeaderElector(other, "cand", lease_duration=10, renew_deadline=7, retry_period=1, clock=clock)
    other.pause = 3.0
    assert not cand.try_acquire_or_renew() and other.writes == []
    other.pause, other.slow = 0.0, 3.0                     # a GET answered after 3 s: the write goes
    assert cand.try_acquire_or_renew() and other.writes[-1].holder == "cand"



def test_a_replica_stopped_during_its_read_does_not_take_the_lease_it_reads_fresh():
    """Found by the paused-leader test on the real control plane (1 run in 8): the old leader was
    stopped inside its Lease read; on resuming, the read returned the new leader's record, which
    was timed from *before* the read (12 s earlier), so it looked expired and the old leader took
    the Lease from a healthy new leader (a 200 in the audit log, then both replicas left). A
    record is now timed from when its read returned."""
    clock = Clock()
    lock = PausingLock(clock, "me")
    el = LeaderElector(lock, "me", lease_duration=4, renew_deadline=3, retry_period=0.5, clock=clock)
    assert el.try_acquire_or_renew()
    lock.rec = LeaseRecord("new", "", 4, 1, "t1", "t1", "7")   # the new leader took over meanwhile
    lock.slow = 12.0                                             # stopped for 12 s inside the read
    assert not el.try_acquire_or_renew()
    assert lock.writes[-1].holder == "me" and len(lock.writes) == 1 and lock.rec.holder == "new"
    lock.slow = 0.0
    clock.t += 3.9                                               # still inside its lease by our clock
    assert not el.try_acquire_or_renew() and len(lock.writes) == 1
    clock.t += 0.2                                               # unrenewed for 4 s since the read
    assert el.try_acquire_or_renew() and lock.writes[-1].holder == "me"

def _pod(uid: str, gpus: int) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, node_name="", phase="Pending", created=1.0, annotations={})


def _core(clock: Clock) -> tuple[SchedulerCore, list[str]]:
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock)
    nudged: list[str] = []
    core.nudge = lambda p, node, gpus, waited: nudged.append(f"{p.uid}@{node}:{gpus}")
    return core, nudged


def test_pods_seen_before_the_service_answers_are_nudged_once_it_does():
    clock = Clock()
    core, nudged = _core(clock)
    core.node_seen(NodeFacts("n", 2, "default", "", False))
    core.pod_seen(_pod("a", 1))          # found at start-up: its last call was answered elsewhere (503)
    core.pod_seen(_pod("b", 2))
    core.run_pass()
    assert core.jobs["a"].state.name == "ASSUMED" and core.jobs["b"].state.name == "PENDING"
    assert nudged == [] and core.due_nudges() == 0       # not yet: the server may not listen
    core.serving = True
    assert core.due_nudges() == 1 and nudged == ["a@n:0"]
    assert core.due_nudges() == 0                         # once ...
    clock.t += NUDGE_AGAIN_S
    assert core.due_nudges() == 1 and nudged == ["a@n:0", "a@n:0"]   # ... and once more without a call
    clock.t += NUDGE_AGAIN_S
    assert core.due_nudges() == 0
    core.pod_gone("a")                   # b, unknown too, is nudged the moment it is nominated
    core.run_pass()
    assert nudged[-1] == "b@n:0,1"
    core.pod_gone("b")
    core.pod_seen(_pod("c", 1))          # seen while serving: its filter call comes, no nudge
    core.run_pass()
    assert core.jobs["c"].state.name == "ASSUMED" and len(nudged) == 3 and core.due_nudges() == 0


def test_a_queued_nudge_is_dropped_once_the_pod_was_told_nominated_or_left():
    clock = Clock()
    core, _ = _core(clock)
    core.serving = True
    core.node_seen(NodeFacts("n", 1, "default", "", False))
    core.pod_seen(_pod("a", 1))
    core.pod_seen(_pod("b", 1))
    core.run_pass()
    assert core.filter(_pod("b", 1), ["n"])[0] == []      # b waits behind a
    core.pod_gone("a")
    core.run_pass()
    assert core.nudge_wanted("b", "n") and not core.nudge_wanted("b", "other")
    assert core.filter(_pod("b", 1), ["n"])[0] == ["n"]   # kube-scheduler asked meanwhile: the bind comes
    assert not core.nudge_wanted("b", "n") and not core.nudge_wanted("a", "n")


def test_eta_annotations_skip_pods_about_to_start_and_pods_no_longer_pending():
    written: list[str] = []

    pending = {"far": True, "soon": True, "gone": False, "young": True, "stuck": True}

    class P:
        def __init__(self, uid: str, created: float = 900.0) -> None:
            self.uid, self.key, self.created = uid, f"default/{uid}", created

    ann = EtaAnnotator(lambda pod, text: written.append(pod.uid) or "", 60.0, soon=5.0,
                       pending=lambda uid: pending[uid])
    ann.sync([(P("far"), 1300.0), (P("soon"), 1003.0), (P("gone"), 1500.0), (P("young", 997.0), 1300.0)], 1000.0)
    assert written == ["far"]
    assert (ann.counts["written"], ann.counts["imminent"], ann.counts["not_pending"]) == (1, 2, 1)
    ann.sync([(P("far"), 1300.0), (P("young", 997.0), 1300.0)], 1010.0)   # it waited: annotated now
    assert written == ["far", "young"] and ann.counts["unchanged"] == 1
    ann.sync([(P("far"), math.inf), (P("young", 997.0), 1300.0), (P("stuck"), math.inf)], 1020.0)
    assert written == ["far", "young", "far"]   # never over a written ETA; nothing for a pod never estimated
    assert ann.counts["no_estimate"] == 1
    with pytest.raises(ValueError, match="soon"):
        EtaAnnotator(lambda p, t: "", 60.0, soon=-1.0)


class Resp:
    data = b"{}"

    def release_conn(self) -> None:
        pass


class RecordingApi:
    """The CoreV1Api methods the service writes with; each call is recorded and succeeds."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def __getattr__(self, name: str):
        if not name.startswith(("patch_", "create_", "delete_")):
            raise AttributeError(name)

        def call(*args, **kwargs):
            self.writes.append(name)
            return Resp()
        return call


class Elector:
    is_leader = True


def test_every_writer_of_a_replica_past_its_deadline_stops_at_the_one_fence():
    """The nudge, the ETA annotation, the Eviction, its event, the bind and the operator's pod
    all go through the bridge's client: once the replica is past its renew deadline none reaches
    the API server (on the code before, only passes and binds were guarded)."""
    from types import SimpleNamespace

    from dlsched.service.eta import kube_writer
    from dlsched.service.kube import KubeBridge
    from dlsched.service.runtime import LiveService

    api, elector = RecordingApi(), Elector()
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"))
    bridge = KubeBridge(api, core)
    service = LiveService(core, bridge)
    service.attach_elector(elector)
    intent = SimpleNamespace(name="p", namespace="default", uid="u", grace_s=5, for_pod="q", reason="test")
    pod = _pod("u", 1)

    def write_all() -> list[str]:
        return [bridge.touch("default", "p", "u", "n", "0"), kube_writer(bridge.api)(pod, "in 60s"),
                bridge.evict(intent), bridge.preempted_event(intent),
                bridge.bind("default", "p", "u", "n", [0], annotate=False)]

    assert write_all() == ["", "", "accepted", "", ""] and len(api.writes) == 5   # while it leads
    elector.is_leader = False
    outcomes = write_all()
    with pytest.raises(ValueError, match="renew deadline"):
        bridge.create_pod("default", {"metadata": {"name": "x"}})
    assert len(api.writes) == 5                                   # nothing more reached the API server
    assert all("renew deadline" in o for o in outcomes) and outcomes[2].startswith("retry: ")
    assert sum(bridge.api.refused.values()) == 6


def _gang_pod(uid: str, gpus: int) -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, node_name="", phase="Pending", created=1.0, annotations={},
                    labels={"dlsched.io/job": "train", "dlsched.io/min-member": "2"})


def test_gang_pods_seen_before_the_service_answers_are_nudged_once_it_does():
    """A restart or a new leader: a gang's pods were last answered elsewhere (503); once nominated
    they are nudged when the service answers, once more after NUDGE_AGAIN_S without a call, and
    not after kube-scheduler asked for them."""
    clock = Clock()
    core, nudged = _core(clock)
    for n in ("n1", "n2"):
        core.node_seen(NodeFacts(n, 6, "default", "", False))
    core.pod_seen(_gang_pod("g0", 6))
    core.pod_seen(_gang_pod("g1", 6))
    core.run_pass()
    assert sorted(core.gangs.by_uid["g0"].places) == ["g0", "g1"]   # nominated, one node each
    assert nudged == [] and core.due_nudges() == 0    # not yet: the server may not listen
    core.serving = True
    assert core.due_nudges() == 2 and sorted(nudged) == ["g0@n1:0,1,2,3,4,5", "g1@n2:0,1,2,3,4,5"]
    assert core.due_nudges() == 0
    clock.t += NUDGE_AGAIN_S
    assert core.nudge_wanted("g0", "n1") and core.nudge_wanted("g1", "n2")   # a queued nudge is sent
    assert not core.nudge_wanted("g0", "n2")          # not on another node
    core.verdict(_gang_pod("g0", 6), ["n1", "n2"])    # kube-scheduler asked for g0: answered by us
    assert not core.nudge_wanted("g0", "n1")          # told "nominated": its bind is on its way
    assert core.due_nudges() == 1 and nudged[-1].startswith("g1@")
    clock.t += NUDGE_AGAIN_S
    assert core.due_nudges() == 0                     # two nudges in all
