"""Gangs in-process (service/gangs.py): membership, placement -> pods, nomination of the whole
gang, the permit barrier of its binds (all-or-nothing), time-outs, and the simulator and the
service placing the same gang the same way."""

from __future__ import annotations

import threading

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.gangs import GangError, membership, split_placement
from dlsched.service.pods import NodeFacts, PodFacts, pod_facts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store
from dlsched.sim import SimConfig, Simulator


def gang_pod(i: int, gpus: int = 8, group: str = "train", size: int = 4, created: float = 100.0,
             how: str = "label") -> PodFacts:
    labels, ann = {}, {}
    if how == "label":
        labels = {"dlsched.io/job": group, "dlsched.io/min-member": str(size)}
    elif how == "coscheduling":
        labels = {"scheduling.k8s.io/group-name": group}
        ann = {"pod-group.scheduling.sigs.k8s.io/min-available": str(size)}
    return PodFacts(f"{group}-uid-{i}", "default", f"{group}-{i}", gpus, created=created + i * 0.001,
                    labels=labels, annotations=ann)


class Bridge:
    """Records binds and deletions; ``fail`` names pods whose bind the API server refuses."""

    def __init__(self, fail: tuple[str, ...] = ()) -> None:
        self.binds: list[tuple[str, str, tuple]] = []
        self.deleted: list[str] = []
        self.fail = fail
        self.lock = threading.Lock()

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True) -> str:
        with self.lock:
            if name in self.fail:
                return "API server refused the bind (409): Conflict"
            self.binds.append((name, node, tuple(gpus or ())))
            return ""

    def delete(self, pod: PodFacts) -> bool:
        with self.lock:
            self.deleted.append(pod.name)
        return True


def make_core(nodes: int = 4, backfill: bool = False, **gang_kw) -> SchedulerCore:
    core = SchedulerCore(make_policy("fifo", "consolidate", backfill=backfill), Store("sqlite://"),
                         clock=iter(range(1000, 10**6)).__next__)
    for key, value in gang_kw.items():
        setattr(core.gangs, key, value)
    for i in range(nodes):
        core.node_seen(NodeFacts(f"gpu-{i}", 8, "default", "", False))
    return core


NAMES = [f"gpu-{i}" for i in range(4)]


def bind_all(service: LiveService, pods: list[PodFacts], nodes: dict[str, str]) -> dict[str, str]:
    """Each pod's bind in its own thread, as kube-scheduler's binding goroutines call them."""
    out: dict[str, str] = {}

    def one(p: PodFacts) -> None:
        out[p.name] = service.bind(p.namespace, p.name, p.uid, nodes[p.uid])
    threads = [threading.Thread(target=one, args=(p,)) for p in pods]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    return out


# -- membership ----------------------------------------------------------------------------
def test_membership_by_label_coscheduling_jobset_and_indexed_job_owner():
    assert membership(gang_pod(0)).key == "default/train" and membership(gang_pod(0)).size == 4
    m = membership(gang_pod(1, how="coscheduling", size=2))
    assert (m.key, m.size, m.source) == ("default/train", 2, "group-name")
    job_pod = pod_facts({"metadata": {"uid": "u1", "name": "w-0", "namespace": "ml",
                                      "annotations": {"batch.kubernetes.io/job-completion-index": "0",
                                                      "dlsched.io/min-member": "3"},
                                      "ownerReferences": [{"kind": "Job", "name": "w", "uid": "j1", "controller": True}]},
                         "spec": {"containers": []}})
    assert job_pod.owner == "Job/w/j1"
    assert membership(job_pod) == membership(job_pod) and membership(job_pod).key == "ml/w"
    assert membership(job_pod).source == "indexed job"
    jobset = PodFacts("u2", "ml", "js-0", 8, labels={"jobset.sigs.k8s.io/jobset-name": "js",
                                                      "dlsched.io/min-member": "2"})
    assert membership(jobset).key == "ml/js" and membership(jobset).source == "jobset"
    # an owner or dlsched.io/job without a size is no gang (dlsched.io/job alone names a single-pod
    # job: how a preempted job's re-created pod is matched); a coscheduling group without one is an
    # error naming the label
    assert membership(PodFacts("u3", "ml", "js-1", 8, labels={"jobset.sigs.k8s.io/jobset-name": "js"})) is None
    assert membership(PodFacts("u4", "ml", "solo", 8)) is None
    assert membership(PodFacts("u5", "ml", "x", 8, labels={"dlsched.io/job": "x"})) is None
    with pytest.raises(GangError, match="dlsched.io/min-member"):
        membership(PodFacts("u5", "ml", "x", 8, labels={"scheduling.k8s.io/group-name": "x"}))
    with pytest.raises(GangError, match="'zero'"):
        membership(PodFacts("u6", "ml", "x", 8, labels={"dlsched.io/job": "x", "dlsched.io/min-member": "zero"}))


def test_a_placement_splits_into_the_pods_node_local_shares():
    four = split_placement(((0, 0xFF), (1, 0xFF), (2, 0xFF), (3, 0xFF)), [(f"p{i}", 8) for i in range(4)])
    assert four == {"p0": (0, 0xFF), "p1": (1, 0xFF), "p2": (2, 0xFF), "p3": (3, 0xFF)}
    # 12 GPUs as one whole node + 4 GPUs elsewhere: two pods on the first, one on the second
    three = split_placement(((2, 0xFF), (0, 0xF0)), [("a", 4), ("b", 4), ("c", 4)])
    assert three == {"a": (2, 0x0F), "b": (2, 0xF0), "c": (0, 0xF0)}
    with pytest.raises(GangError, match="fits in no node"):
        split_placement(((0, 0x3F), (1, 0x03)), [("a", 4), ("b", 4)])
    with pytest.raises(GangError, match="holds 8 GPUs, the pods request 12"):
        split_placement(((0, 0xFF),), [("a", 8), ("b", 4)])


# -- nomination and the permit stage -------------------------------------------------------
def test_a_4x8_gang_waits_for_its_pods_then_is_nominated_and_bound_whole():
    core = make_core()
    bridge = Bridge()
    service = LiveService(core, bridge)
    pods = [gang_pod(i) for i in range(4)]
    for p in pods[:3]:
        passed, why = core.verdict(p, NAMES)
        assert passed == [] and "gang default/train: " in why and "of 4 pods arrived" in why
    assert "3 of 4 pods arrived" in core.verdict(pods[0], NAMES)[1]
    assert core.state.n_pending == 0                      # no kernel job before the gang is complete
    passed, why = core.verdict(pods[3], NAMES)
    assert len(passed) == 1 and "nominated" in why
    nodes = {}
    for p in pods:
        [nodes[p.uid]] = core.verdict(p, NAMES)[0]
    assert sorted(nodes.values()) == NAMES                 # 4 x 8 GPUs on 4 nodes, one pod each
    rows = core.store.assignment_rows()
    assert len(rows) == 32 and {r["state"] for r in rows} == {"assumed"}
    assert len(core.store.gang_records()) == 1
    out = bind_all(service, pods, nodes)
    assert out == {p.name: "" for p in pods}
    assert sorted(b[1] for b in bridge.binds) == NAMES and all(b[2] == tuple(range(8)) for b in bridge.binds)
    assert core.state.n_running == 1 and core.state.busy_gpus == 32
    assert {r["state"] for r in core.store.assignment_rows()} == {"bound"}
    assert core.store.gang_records() == {}                 # nothing left to recover
    [row] = core.snapshot()["gangs"]
    assert (row["state"], row["gpus"], len(row["pods"])) == ("running", 32, 4)
    # the watch then shows each pod bound: accounted for by the gang, not adopted apart
    for p in pods:
        core.pod_seen(PodFacts(p.uid, p.namespace, p.name, 8, node_name=nodes[p.uid], labels=p.labels))
    assert core.state.n_running == 1
    # the job ends with its last pod
    for p in pods[:3]:
        core.pod_gone(p.uid)
    assert core.state.n_running == 1 and core.state.busy_gpus == 32
    core.pod_gone(pods[3].uid)
    assert core.state.n_running == 0 and core.store.assignment_rows() == []


def test_with_three_nodes_free_no_pod_of_the_gang_is_nominated_and_backfill_passes_it():
    core = make_core(backfill=True)
    other = PodFacts("busy", "default", "busy", 8, created=1.0)
    assert core.verdict(other, NAMES)[0] == ["gpu-0"]
    pods = [gang_pod(i) for i in range(4)]
    for p in pods:
        passed, why = core.verdict(p, NAMES)
        assert passed == []
    assert ("gang default/train (4 pods, 32 GPUs): gang default/train of 4 x 8 GPUs: needs 4 pods of 8 free GPUs on "
            "one node each; 3 node(s) of VC default have 8 free GPUs, room for 3 pod(s)") in why
    assert all(r["pod_uid"] == "busy" for r in core.store.assignment_rows())
    small = PodFacts("small", "default", "small", 1, created=500.0)
    assert len(core.verdict(small, NAMES)[0]) == 1          # not blocked by the gang (backfill)
    core.pod_gone("busy")
    core.pod_gone("small")
    assert sorted(n for p in pods for n in core.verdict(p, NAMES)[0]) == NAMES


def test_one_failed_bind_releases_every_pod_of_the_gang():
    core = make_core()
    bridge = Bridge(fail=("train-2",))
    service = LiveService(core, bridge)
    pods = [gang_pod(i) for i in range(4)]
    for p in pods:
        core.verdict(p, NAMES)
    nodes = {p.uid: core.verdict(p, NAMES)[0][0] for p in pods}
    out = bind_all(service, pods, nodes)
    assert all("the bind of pod default/train-2 failed" in e for e in out.values()), out
    bound = {b[0] for b in bridge.binds}
    assert bound and set(bridge.deleted) == bound          # every pod bound before the failure is deleted
    assert core.state.n_running == 0 and core.store.assignment_rows() == []
    assert core.gangs.counters["gang binds failed"] == 1
    # the pods not deleted wait for the recreated ones: the gang forms again
    left = [p for p in pods if p.name not in bound]
    assert "of 4 pods arrived" in core.verdict(left[0], NAMES)[1]


def test_a_gang_whose_pods_do_not_all_reach_bind_is_released_after_the_permit_timeout():
    core = make_core(permit_timeout=0.3)
    service = LiveService(core, Bridge())
    pods = [gang_pod(i) for i in range(4)]
    for p in pods:
        core.verdict(p, NAMES)
    nodes = {p.uid: core.verdict(p, NAMES)[0][0] for p in pods}
    out = bind_all(service, pods[:3], nodes)
    assert all("3 of 4 pods reached bind within 0.3 s" in e for e in out.values()), out
    assert service.bridge.binds == [] and core.store.assignment_rows() == []
    assert core.gangs.counters["gang permits timed out"] == 1


def test_a_gang_missing_pods_is_reported_after_the_arrival_timeout():
    core = make_core(arrival_timeout=5.0)
    pods = [gang_pod(i) for i in range(2)]
    for p in pods:
        core.verdict(p, NAMES)
    for _ in range(10):
        core.expire_unseen(1000.0)   # the clock moves one second per call
    assert core.gangs.counters["gangs incomplete after the arrival timeout"] == 1
    assert "2 of 4 pods arrived (reported late)" in core.verdict(pods[0], NAMES)[1]
    assert any(d["kind"] == "gang_late" for d in core.store.decision_log(1000))


# -- the simulator and the service place the same gang the same way -------------------------
class Placements:
    """A kernel observer: each job's placement, read when it stops (still set then)."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.seen: dict[str, tuple] = {}

    def stopped(self, job, vc, now, why) -> None:
        self.seen[job.job_id] = tuple((self.cluster.nodes[n].node_id, m) for n, m in job.placement)


@pytest.mark.parametrize("sizes", [(8, 8, 8), (4, 4, 4), (2, 2, 2, 2, 2, 2)])
def test_the_simulator_and_the_service_place_the_same_gang_the_same_way(sizes):
    """Same arrivals: pods of 6, 3, 1 GPUs (one at a time), then the gang. The simulator sees the
    gang as one job of the summed GPUs; the service's pods, each split from its placement."""
    singles = [6, 3, 1]
    cluster = ClusterSpec.from_vc_sizes({"default": 5})
    record = Placements(cluster)
    jobs = [Job(f"s{i}", "default", g, float(i), 1e6) for i, g in enumerate(singles)]
    jobs.append(Job("gang", "default", sum(sizes), 10.0, 1e6))
    Simulator(cluster, make_policy("fifo", "consolidate"), SimConfig(), observers=[record]).run(jobs)
    sim = record.seen

    core = SchedulerCore(make_policy("fifo", "consolidate"), Store("sqlite://"),
                         clock=iter(range(1000, 10**6)).__next__)
    for spec in cluster.nodes:
        core.node_seen(NodeFacts(spec.node_id, spec.gpus, "default", "", False))
    names = [n.node_id for n in cluster.nodes]
    for i, g in enumerate(singles):
        core.verdict(PodFacts(f"s{i}", "default", f"s{i}", g, created=float(i)), names)
    pods = [gang_pod(i, g, size=len(sizes), created=10.0) for i, g in enumerate(sizes)]
    for p in pods:
        core.verdict(p, names)
    for i in range(len(singles)):
        job = core.jobs[f"s{i}"]
        assert tuple((core.state.node_ids[n], m) for n, m in job.placement) == sim[f"s{i}"]
    gang_job = next(j for j in core.jobs.values() if j.job_id.startswith("gang:"))
    live = tuple((core.state.node_ids[n], m) for n, m in gang_job.placement)
    assert live == sim["gang"]
    # and the pods together hold exactly that placement
    per_node: dict[str, int] = {}
    for p in pods:
        [node] = core.verdict(p, names)[0]
        per_node[node] = per_node.get(node, 0) | sum(1 << g for g, _ in core.slots[p.uid])
    assert per_node == dict(sim["gang"])


# -- deploy/ examples ------------------------------------------------------------------------
def test_the_deploy_gang_examples_read_as_one_gang_of_4_pods_of_8_gpus():
    from pathlib import Path

    yaml = pytest.importorskip("yaml")
    deploy = Path(__file__).resolve().parents[1] / "deploy"
    job, = [d for d in yaml.safe_load_all((deploy / "gang-pytorchjob.yaml").read_text()) if d]
    specs = job["spec"]["pytorchReplicaSpecs"]
    pods = [pod_facts({**specs[role]["template"], "metadata": {**specs[role]["template"]["metadata"],
                                                                "uid": f"{role}-{i}", "name": f"{role}-{i}"}})
            for role in ("Master", "Worker") for i in range(specs[role]["replicas"])]
    listing, = [d for d in yaml.safe_load_all((deploy / "gang-pods.yaml").read_text()) if d]
    plain = [pod_facts({**p, "metadata": {**p["metadata"], "uid": p["metadata"]["name"]}}) for p in listing["items"]]
    for group in (pods, plain):
        assert len(group) == 4 and {p.gpus for p in group} == {8}
        assert len({membership(p) for p in group}) == 1 and membership(group[0]).size == 4
        core = make_core()
        for p in group:
            core.verdict(p, NAMES)
        assert sorted(core.verdict(p, NAMES)[0][0] for p in group) == NAMES


def test_the_dashboard_shows_a_gang_as_one_row_with_its_pods():
    from dlsched.service.dashboard import dashboard_data, render_body, render_page

    core = make_core()
    service = LiveService(core, Bridge())
    pods = [gang_pod(i) for i in range(4)]
    for p in pods:
        core.verdict(p, NAMES)
    nodes = {p.uid: core.verdict(p, NAMES)[0][0] for p in pods}
    assert bind_all(service, pods, nodes) == {p.name: "" for p in pods}
    data = dashboard_data(service)
    [row] = data["gangs"]
    assert (row["gang"], row["state"], row["gpus"], row["size"]) == ("default/train", "running", 32, 4)
    assert sorted((p["node"], tuple(p["gpu_indices"])) for p in row["pods"]) == [(n, tuple(range(8))) for n in NAMES]
    holders = {j["pod"] for n in data["nodes"] for g in n["gpus"] for j in g["jobs"]}
    assert holders == {"default/train"}                  # every GPU held by the one gang job
    body = render_body(data)
    assert body.count('data-gang="default/train"') == 1 and body.count("<li>default/train-") == 4
    assert "gangs" in render_page(data) and "d.gangs" in render_page(data)   # the script draws them too


@pytest.mark.parametrize("option, value", [("--gang-permit-timeout", "0"), ("--gang-arrival-timeout", "-1")])
def test_bad_gang_timeouts_are_one_error_line(option, value, tmp_path):
    pytest.importorskip("fastapi")
    from typer.testing import CliRunner

    from dlsched.cli import main

    res = CliRunner().invoke(main.app, ["serve", option, value, "--api-server", "https://127.0.0.1:1",
                                        "--db", f"sqlite:///{tmp_path}/s.db"])
    assert res.exit_code == 2, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[-1].startswith("error: ") and option in lines[-1] and "Traceback" not in res.output


def test_a_nominated_gang_losing_a_pod_forms_again_and_is_placed_once_replaced():
    core = make_core()
    pods = [gang_pod(i) for i in range(4)]
    for p in pods:
        core.verdict(p, NAMES)
    assert len(core.store.assignment_rows()) == 32
    core.pod_gone(pods[1].uid)                        # deleted before its bind
    assert core.store.assignment_rows() == [] and core.store.gang_records() == {}
    assert core.state.n_pending == 0 and core.state.busy_gpus == 0
    assert "3 of 4 pods arrived" in core.verdict(pods[0], NAMES)[1]
    replacement = gang_pod(7)
    core.verdict(replacement, NAMES)
    group = [pods[0], pods[2], pods[3], replacement]
    assert sorted(core.verdict(p, NAMES)[0][0] for p in group) == NAMES
    [row] = core.snapshot()["gangs"]
    assert row["id"] == "gang:default/train#2" and row["state"] == "assumed"
