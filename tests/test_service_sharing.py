"""The live service with co-location and the policy's scores: node labels for GPU memory and
time-sliced replicas, prioritize scores from the placement's score stage (hand-checked), and the
refusal of policies that need ground truth or preemption."""

from __future__ import annotations

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import MAX_SCORE, SchedulerCore
from dlsched.service.pods import NodeFacts, PodError, PodFacts, node_facts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Bridge:
    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def make_core(policy: str, placement: str | None, nodes, cap: int = 1, preds: dict | None = None):
    preds = preds or {}

    def predict(job):
        job.pred_gpu_util, job.pred_gpu_mem_mib = preds[job.model_name]

    core = SchedulerCore(make_policy(policy, placement, share=cap > 1), Store("sqlite://"), max_jobs_per_gpu=cap,
                         clock=iter(range(1000, 10**6)).__next__, predict=predict if preds else None)
    for node in nodes:
        core.node_seen(node)
    return core, LiveService(core, Bridge())


def pod(core, uid: str, gpus: int, model: str = "") -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, created=float(len(core.jobs)),
                    annotations={"dlsched.io/model": model} if model else {})


def place(core, service, p: PodFacts, names: list[str]) -> str:
    """filter then bind, as kube-scheduler does; the node, or '' when the pod waits."""
    passed, _ = core.filter(p, names)
    if passed:
        assert service.bind("default", p.name, p.uid, passed[0]) == ""
        return passed[0]
    return ""


def scores(core, p: PodFacts, names: list[str]) -> dict[str, int]:
    return dict(zip(names, core.priorities(p, names)))


def test_prioritize_maps_best_fit_scores_and_keeps_the_nomination_on_top():
    """best-fit scores a node 1 - (free GPUs left after the job) / 8 (the VC's largest node);
    mapped to 1 + floor(8 s + 0.5). Nodes of another VC, unknown ones and nodes without room
    score 0."""
    nodes = [NodeFacts("a", 8, "default", "", False), NodeFacts("b", 8, "default", "", False),
             NodeFacts("c", 4, "default", "", False), NodeFacts("d", 8, "other", "", False)]
    core, service = make_core("fifo", "best-fit", nodes)
    names = ["a", "b", "c", "d", "x"]
    assert place(core, service, pod(core, "p1", 6), names) == "a"     # a: 2 GPUs left
    q = pod(core, "q", 2)
    assert core.filter(q, names)[0] == ["a"]                          # the tightest node: a, exactly
    # b: 8 free, 6 left -> 1 - 6/8 = 0.25 -> 1 + 2 = 3;  c: 4 free, 2 left -> 0.75 -> 1 + 6 = 7
    assert scores(core, q, names) == {"a": MAX_SCORE, "b": 3, "c": 7, "d": 0, "x": 0}
    r = pod(core, "r", 4)
    assert core.filter(r, names)[0] == ["c"]                          # q holds a's last 2 GPUs
    # b: 4 left -> 0.5 -> 5;  a: no free GPU (q's nomination) -> 0
    assert scores(core, r, names) == {"a": 0, "b": 5, "c": MAX_SCORE, "d": 0, "x": 0}
    # a pod dlsched has not heard of, and a running one: 0 everywhere
    assert set(scores(core, pod(core, "nobody", 1), names).values()) == {0}
    service.bind("default", "q", "q", "a")
    assert set(scores(core, q, names).values()) == {0}


def test_prioritize_follows_the_colocation_filter_and_the_job_cap():
    """ffd-util with 2 jobs per GPU on four 1-GPU nodes: first fit, so every node it accepts
    scores 1.0 (-> 9); a node whose holders' predicted utilisation plus the job's exceeds 100 %
    fails its filter (0), a GPU holding 2 jobs has no room (0)."""
    nodes = [NodeFacts(f"n{i}", 1, "default", "", False) for i in range(1, 5)]
    preds = {"u60": (60.0, 10000.0), "u30": (30.0, 10000.0), "u50": (50.0, 10000.0)}
    core, service = make_core("ffd-util", None, nodes, cap=2, preds=preds)
    names = ["n1", "n2", "n3", "n4"]
    assert place(core, service, pod(core, "j1", 1, "u60"), names) == "n1"
    assert place(core, service, pod(core, "j2", 1, "u30"), names) == "n1"   # shared: 60 + 30 <= 100
    assert core.slots["j2"] == [(0, 1)]
    assert place(core, service, pod(core, "j3", 1, "u50"), names) == "n2"   # n1 holds 2 jobs
    j4 = pod(core, "j4", 1, "u60")
    assert core.filter(j4, names)[0] == ["n3"]                              # n2: 50 + 60 > 100
    assert scores(core, j4, names) == {"n1": 0, "n2": 0, "n3": MAX_SCORE, "n4": 9}
    core.state.check_invariants()


def test_horus_cost_scores_rank_free_gpus_above_shared_ones():
    """Horus's cost (Eq. 7-10, the RTX 2080 curve f(U) = 1.16366 U/100 below 100 %) on 32 GiB
    V100s, a node scored 1 / (1 + mem / 32768 + f(util)):
    free n3: 1 / (1 + 8000/32768 + f(40) = 0.46546) = 0.5849 -> 1 + floor(4.68 + 0.5) = 6;
    n1, shared with j1: 1 / (1 + 16000/32768 + f(80) = 0.93093) = 0.4134 -> 1 + floor(3.31 + 0.5) = 4."""
    nodes = [NodeFacts("n1", 1, "default", "", False), NodeFacts("n2", 1, "default", "", False),
             NodeFacts("n3", 1, "default", "", False)]
    preds = {"m": (40.0, 8000.0)}
    core, service = make_core("horus", None, nodes, cap=2, preds=preds)
    names = ["n1", "n2", "n3"]
    assert place(core, service, pod(core, "j1", 1, "m"), names) == "n1"
    j2 = pod(core, "j2", 1, "m")
    assert core.filter(j2, names)[0] == ["n2"]           # a free GPU before a shared one
    assert scores(core, j2, names) == {"n1": 4, "n2": MAX_SCORE, "n3": 6}


def test_node_labels_give_gpu_memory_and_time_sliced_replicas():
    cap = {"nvidia.com/gpu": "8"}
    obj = {"metadata": {"name": "n", "labels": {"dlsched.io/gpu-type": "A100", "dlsched.io/gpu-memory-mib": "16384",
                                                "dlsched.io/gpu-replicas": "2"}},
           "status": {"allocatable": cap}}
    facts = node_facts(obj)
    assert (facts.gpus, facts.gpu_mem_mib, facts.replicas, facts.gpu_type) == (4, 16384, 2, "A100")
    # GPU feature discovery's labels when dlsched's own are absent
    obj["metadata"]["labels"] = {"nvidia.com/gpu.memory": "24576", "nvidia.com/gpu.replicas": "4"}
    assert (node_facts(obj).gpus, node_facts(obj).gpu_mem_mib) == (2, 24576)
    obj["metadata"]["labels"] = {"dlsched.io/gpu-replicas": "0"}
    with pytest.raises(PodError, match="dlsched.io/gpu-replicas"):
        node_facts(obj)
    obj["metadata"]["labels"] = {"dlsched.io/gpu-memory-mib": "lots"}
    with pytest.raises(PodError, match="dlsched.io/gpu-memory-mib"):
        node_facts(obj)


def test_the_memory_label_decides_what_shares():
    """Two 10,000 MiB jobs share a 32 GiB V100 but not a GPU labelled 16,384 MiB."""
    preds = {"m": (30.0, 10000.0)}
    for mem, shared in ((0, True), (16384, False)):
        core, service = make_core("fifo", "consolidate", [NodeFacts("n", 1, "default", "", False, mem)], cap=2,
                                  preds=preds)
        assert core.state.node_mem[0] == (mem or 32 * 1024)
        assert place(core, service, pod(core, "j1", 1, "m"), ["n"]) == "n"
        assert bool(place(core, service, pod(core, "j2", 1, "m"), ["n"])) is shared
    # a label that changes on an idle node takes effect
    core.pod_gone("j1")
    core.node_seen(NodeFacts("n", 1, "default", "", False, 40960))
    assert core.state.node_mem[core.state.node_index["n"]] == 40960


@pytest.mark.parametrize("policy, message", [
    ("sjf", "policy sjf is an oracle"),
    ("oracle-pairing", "policy oracle-pairing is an oracle"),
    ("srtf", "policy srtf is an oracle"),
])
def test_oracle_policies_are_refused(policy, message):
    with pytest.raises(ValueError, match=message):
        SchedulerCore.check_policy(make_policy(policy))


def test_a_waiting_pod_under_horus_gets_a_reason_and_a_queue_rank():
    """Horus's queue has no key (its rounds pick among the pending jobs): a pod it keeps waiting
    is answered with a reason, not an error, and the queue lists pods in arrival order."""
    preds = {"m": (40.0, 20000.0)}
    core, service = make_core("horus", None, [NodeFacts("n", 1, "default", "", False)], cap=2, preds=preds)
    assert place(core, service, pod(core, "j1", 1, "m"), ["n"]) == "n"
    passed, failed = core.filter(pod(core, "j2", 1, "m"), ["n"])      # 2 x 20,000 MiB > 32 GiB
    assert passed == [] and failed["n"].startswith("queued by dlsched (horus): no room the policy accepts")
    core.pod_seen(pod(core, "j3", 1, "m"))
    assert [(q["pod"], q["rank"]) for q in core.queue()] == [("default/j2", 0), ("default/j3", 1)]
    assert "1 of 2 pending jobs of VC default arrived earlier" in core.why_waiting("j3")


def test_a_preempt_from_a_live_pass_without_an_api_server_keeps_the_gpus():
    """A policy that yields Preempt without saying so: the eviction is recorded as an intent but,
    with no evictor attached, the running pod keeps its GPUs in the kernel (nothing evicts it)."""
    from dlsched.kernel.decisions import Preempt
    from dlsched.sched.policies.fifo import FifoPolicy

    class Sneaky(FifoPolicy):
        name = "sneaky"

        def schedule(self, view, vc):
            for job in [j for j in core.jobs.values() if j.state.name == "RUNNING"]:
                yield Preempt(job)
            yield from super().schedule(view, vc)

    core = SchedulerCore(Sneaky(make_policy("fifo").placer), Store("sqlite://"),
                         clock=iter(range(1000, 10**6)).__next__)
    core.node_seen(NodeFacts("n", 2, "default", "", False))
    service = LiveService(core, Bridge())
    assert place(core, service, pod(core, "a", 1), ["n"]) == "n"
    assert place(core, service, pod(core, "b", 1), ["n"]) == "n"
    assert core.counters["evictions without an API server"] >= 1
    assert core.jobs["a"].state.name == "RUNNING" and core.state.node_free[0] == 0
    core.state.check_invariants()


def test_a_replayed_log_keeps_the_memory_label(tmp_path):
    from dlsched.service.record import Recorder
    from dlsched.service.replay import load_log

    recorder = Recorder(tmp_path / "log.jsonl")
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=iter(range(1000, 10**6)).__next__,
                         recorder=recorder)
    core.node_seen(NodeFacts("small", 2, "default", "A100", False, 24576))
    core.node_seen(NodeFacts("plain", 2, "default", "A100", False))
    core.pod_seen(pod(core, "p", 1))
    recorder.close()
    mem = {n.node_id: n.gpu_type.memory_mib for n in load_log(tmp_path / "log.jsonl").cluster.nodes}
    assert mem == {"small": 24576, "plain": 40 * 1024}


LIVE_POLICIES = ["fifo", "qssf", "las", "fairshare", "horus", "horus-f", "obp", "ffd-util", "coscheml", "binpack",
                 "loadbalance", "mystic", "random-pairing", "easy", "conservative"]


@pytest.mark.parametrize("cap", [1, 2])
@pytest.mark.parametrize("policy", LIVE_POLICIES)
def test_every_policy_serve_accepts_runs_through_the_extender(policy, cap):
    """Every registry policy that check_policy lets through (the others are refused above) places
    pods, answers a waiting one with a reason, lists its queue and scores nodes, exclusive and
    with 2 jobs per GPU, keeping the kernel's invariants."""
    from dlsched.registry import POLICIES

    assert set(LIVE_POLICIES) == set(POLICIES) - {"sjf", "srtf", "srtf-pred", "oracle-pairing", "pab"}
    preds = {"a": (40.0, 6000.0), "b": (70.0, 12000.0)}
    nodes = [NodeFacts("n1", 2, "default", "", False), NodeFacts("n2", 2, "default", "", False)]
    if cap > 1 and getattr(POLICIES[policy], "exclusive_only", False):   # easy/conservative: refused, said why
        with pytest.raises(ValueError, match="exclusive GPUs"):
            make_core(policy, None, nodes, cap=cap, preds=preds)
        return
    core, service = make_core(policy, None, nodes, cap=cap, preds=preds)
    pods = [pod(core, f"p{i}", 1 + i % 2, "ab"[i % 2]) for i in range(6)]
    placed = [place(core, service, p, ["n1", "n2"]) for p in pods]
    assert placed[0] == "n1" and placed.count("") < len(pods)
    waiting = [p for p, node in zip(pods, placed) if not node]
    assert waiting and len(waiting) <= (3 if cap == 1 else 2)
    for p in waiting:
        assert core.filter(p, ["n1", "n2"])[0] == []
        assert core.why_waiting(p.uid)
    assert len(core.queue()) == len(waiting)
    assert all(0 <= s < MAX_SCORE for s in core.priorities(waiting[0], ["n1", "n2"]))
    core.state.check_invariants()


def test_a_stale_copy_of_an_ended_pod_is_not_adopted_again():
    """Seen once in the kill -9 end-to-end test: a pod deleted after its adoption came back as a
    bound, non-deleted copy (a late event or a scheduler's stale pod), was parked for lack of room,
    and adopted when its node freed up — holding 8 GPUs for a pod that no longer exists. A uid
    never returns once its pod ended, so such copies are ignored."""
    core, service = make_core("fifo", "consolidate", [NodeFacts("n", 8, "default", "", False)])
    bound = PodFacts("u1", "default", "old", 8, node_name="n", annotations={"dlsched.io/gpus": "0,1,2,3,4,5,6,7"})
    core.pod_seen(bound)                                   # adopted (a restart's reconciliation)
    assert core.jobs["u1"].state.name == "RUNNING"
    core.pod_gone("u1")                                    # deleted
    assert place(core, service, pod(core, "next", 4), ["n"]) == "n"
    core.pod_seen(bound)                                   # the stale copy: no room, would be parked
    core.filter(bound, ["n"])                              # ... or inside a filter request
    core.pod_gone("next")
    core.node_seen(NodeFacts("n", 8, "default", "", False))   # a node update retries parked pods
    assert "u1" not in core.jobs and "u1" not in core.parked
    assert core.counters["stale pods of ended uids ignored"] == 2
    assert core.state.node_free[0] == 8
    core.state.check_invariants()
