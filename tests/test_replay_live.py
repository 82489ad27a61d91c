"""Record with the real service code, replay with ``replay --stimuli``: every nomination and every
eviction agrees.

Each log here is written by an in-process :class:`SchedulerCore` with a recorder, driven as the
watch and the extender drive it (pods arrive, passes run, binds succeed or fail, pods end, on a
controlled clock); the replay then feeds the log's stimuli through a kernel built by the same
set-up code (service/kernel_setup.py) and must agree with the service on 100 % of its
nominations (pod, node, GPUs, in order) and evictions (pod, in order). Under fifo, qssf and horus
(a 2-node cluster with a failed bind and a cordon), srtf-pred (an eviction and the controller's
re-created pod, whose attained service and eviction count the replay restores), a 2-node gang,
queues that borrow and reclaim, and two jobs per GPU.
"""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")
from typer.testing import CliRunner

from dlsched.cli.main import app
from dlsched.cli.policy_factory import build_policy
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.feed import Agreement, replay_stimuli
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.queues import LiveQueues
from dlsched.service.record import Recorder, read_events
from dlsched.service.store import Store

T0 = 1_700_000_000.0


class Clock:
    def __init__(self, t: float = T0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def recording_core(path, policy, nodes: list[tuple[str, int, str]], cap: int = 1, predict=None):
    """A live core recording to ``path`` with ``nodes`` (name, GPUs, VC) seen; (core, clock, evictions sent)."""
    clock = Clock()
    core = SchedulerCore(policy, Store("sqlite://"), max_jobs_per_gpu=cap, clock=clock, predict=predict,
                         recorder=Recorder(path))
    sent: list = []
    core.evictor = sent.append
    for name, gpus, vc in nodes:
        core.node_seen(NodeFacts(name, gpus, vc, "", False))
    return core, clock, sent


def bind(core: SchedulerCore, uid: str) -> None:
    """The bind of a nominated pod succeeds (kube-scheduler's bind call, then the API server)."""
    node = core.state.node_ids[core.jobs[uid].placement[0][0]]
    core.begin_bind(uid, node)
    core.end_bind(uid, node, "")


def replayed(path, **kw) -> Agreement:
    return replay_stimuli(path, make_policy, **kw)


def assert_full_agreement(result: Agreement, nominations: int, evictions: int = 0) -> None:
    assert result.first_difference is None, result.first_difference
    assert result.rate == 1.0 and result.replayed == result.recorded and len(result.recorded) == nominations
    assert result.evictions_agree and result.replayed_evictions == result.recorded_evictions
    assert len(result.recorded_evictions) == evictions


# (time, event, pod, GPUs): arrivals, one failed bind (c at t=5: nominated again), a cordon, ends
SCRIPT = [(0, "add", "a", 2), (1, "add", "b", 4), (2, "add", "c", 4), (3, "add", "d", 1), (4, "add", "e", 2),
          (5, "fail", "c", 0), (30, "end", "b", 0), (45, "add", "f", 8), (50, "end", "a", 0), (55, "cordon", "n2", 0),
          (60, "end", "c", 0), (61, "end", "d", 0), (62, "uncordon", "n2", 0), (70, "end", "e", 0),
          (90, "add", "g", 3), (120, "end", "f", 0), (125, "end", "g", 0)]


def record_script(path, policy) -> SchedulerCore:
    core, clock, _ = recording_core(path, policy, [("n1", 8, "default"), ("n2", 8, "default")])
    for t, what, uid, gpus in SCRIPT:
        clock.t = T0 + t
        if what == "add":
            core.pod_seen(PodFacts(uid, "default", uid, gpus, created=clock.t))
        elif what == "fail":
            core.end_bind(uid, core.state.node_ids[core.jobs[uid].placement[0][0]], "conflict")
        elif what in ("cordon", "uncordon"):
            core.node_seen(NodeFacts(uid, 8, "default", "", what == "cordon"))
        else:
            core.pod_gone(uid)
        core.run_pass()
        for uid2, job in list(core.jobs.items()):
            if job.state.name == "ASSUMED" and not (uid2 == "c" and t < 5):
                bind(core, uid2)
    core.recorder.close()
    return core


@pytest.mark.parametrize("policy", ["fifo", "qssf", "horus"])
def test_a_recorded_log_replays_every_nomination(tmp_path, policy):
    log = tmp_path / "events.jsonl"
    record_script(log, make_policy(policy))
    result = replayed(log)
    assert result.policy == policy
    # every pod nominated once, c twice (its first bind failed)
    assert_full_agreement(result, 8)
    assert [r[0] for r in result.recorded].count("c") == 2


def test_horus_replays_through_the_cli_with_its_indexes(tmp_path):
    """The reproduced crash: Horus's room-gains index is made by the live set-up, which replay shares."""
    log = tmp_path / "events.jsonl"
    record_script(log, make_policy("horus"))
    out = CliRunner().invoke(app, ["replay", str(log), "--stimuli"])
    assert out.exit_code == 0, out.output
    assert "with horus: 8 of 8 nominations agree (100.0%; 8 recorded, 8 replayed)" in out.output
    shipped = CliRunner().invoke(app, ["replay", "docs/examples/stimuli-events.jsonl", "--stimuli", "--policy", "horus"])
    assert shipped.exit_code == 0 and "8 of 8 nominations agree" in shipped.output, shipped.output


def gang_pod(i: int, gpus: int = 8) -> PodFacts:
    return PodFacts(f"train-uid-{i}", "default", f"train-{i}", gpus, created=100.0 + i * 0.001,
                    labels={"dlsched.io/job": "train", "dlsched.io/min-member": "2"})


def test_a_two_node_gang_replays(tmp_path):
    """The reproduced 0-of-2: a gang's job spans nodes; the one-node rule exempts it live and in replay."""
    log = tmp_path / "events.jsonl"
    nodes = [(f"gpu-{i}", 8, "default") for i in range(4)]
    core, clock, _ = recording_core(log, make_policy("fifo", "consolidate"), nodes)
    names = [n for n, _, _ in nodes]
    clock.t += 1
    assert core.verdict(gang_pod(0), names)[0] == []   # 1 of 2 pods arrived
    clock.t += 1
    assert len(core.verdict(gang_pod(1), names)[0]) == 1
    clock.t += 1
    assert core.verdict(PodFacts("solo", "default", "solo", 4, created=clock.t), names)[0] != []
    core.recorder.close()
    result = replayed(log)
    assert_full_agreement(result, 2)
    assert result.recorded[0][0].startswith("gang:") and result.recorded[1][0] == "solo"


def test_a_gang_of_pods_that_do_not_divide_the_node_replays(tmp_path):
    """A 2 x 6 gang on 8-GPU nodes is placed as two pods of 6 (never 8 + 4); the recorded
    submission carries its pod shape, so the replay cuts it the same way."""
    log = tmp_path / "events.jsonl"
    nodes = [(f"gpu-{i}", 8, "default") for i in range(3)]
    core, clock, _ = recording_core(log, make_policy("fifo", "consolidate"), nodes)
    names = [n for n, _, _ in nodes]
    clock.t += 1
    assert core.verdict(gang_pod(0, 6), names)[0] == []
    clock.t += 1
    assert len(core.verdict(gang_pod(1, 6), names)[0]) == 1
    core.recorder.close()
    submitted = [e for e in read_events(log) if e.get("stimulus") == "JobSubmitted"]
    assert submitted and submitted[0]["gpus"] == 12 and submitted[0]["gpus_per_pod"] == 6
    result = replayed(log)
    assert_full_agreement(result, 1)   # the gang's nomination: its first node and the GPUs of its pod there
    assert [len(gpus) for _, _, gpus in result.replayed] == [6]


def srtf_predict(job) -> None:
    """Predicted durations from the model annotation, as a predictor would give them."""
    job.pred_duration = {"long": 3600.0, "short": 60.0, "mid": 3550.0}.get(job.model_name, 600.0)


def evict_pod(uid: str, name: str, model: str, created: float, label: str | None = None, node: str = "",
              phase: str = "Pending", deleting: bool = False) -> PodFacts:
    return PodFacts(uid, "default", name, 4, node, phase, deleting, created,
                    labels={"dlsched.io/job": label} if label else {}, annotations={"dlsched.io/model": model})


def test_srtf_pred_with_an_eviction_and_a_re_created_pod_replays(tmp_path):
    """long-0 runs; short-0 arrives and long-0 is evicted for it; the controller's new pod long-1
    takes the job over (attained 4 x 110 GPU-s, 1 eviction) and, when short-0 ends, starts before
    mid-0 (3,550 s predicted): 3,600 s less the 110 s it ran. The replay restores what the new pod
    brings (its run record), or it would rank long-1 as a fresh 3,600 s job behind mid-0."""
    log = tmp_path / "events.jsonl"
    policy = build_policy("srtf-pred", {"source": "job"}, "consolidate")
    core, clock, sent = recording_core(log, policy, [("n", 4, "default")], predict=srtf_predict)
    core.pod_seen(evict_pod("L1", "long-0", "long", T0, label="train"))
    core.run_pass()
    bind(core, "L1")
    clock.t += 100.0
    core.pod_seen(evict_pod("S1", "short-0", "short", clock.t))
    core.run_pass()
    [intent] = sent
    assert intent.uid == "L1"
    core.eviction_sent(intent, "accepted")
    core.pod_seen(evict_pod("L2", "long-1", "long", clock.t, label="train"))   # parked until L1 is gone
    clock.t += 10.0
    core.pod_gone("L1")
    core.run_pass()
    assert core.jobs["L2"].preemptions == 1 and core.jobs["L2"].attained == 4 * 110.0
    bind(core, "S1")
    clock.t += 10.0
    core.pod_seen(evict_pod("M1", "mid-0", "mid", clock.t))   # 3,550 s: ahead of a fresh long job, not of L2
    core.run_pass()
    clock.t += 50.0
    core.pod_gone("S1")
    core.run_pass()
    assert core.jobs["L2"].state.name == "ASSUMED" and core.jobs["M1"].state.name == "PENDING"
    bind(core, "L2")
    core.recorder.close()
    result = replay_stimuli(log, lambda *a, **k: build_policy(a[0], {"source": "job"}, a[1],
                                                              k.get("backfill", False), k.get("share", False)))
    assert_full_agreement(result, 3, evictions=1)
    assert [r[0] for r in result.recorded] == ["L1", "S1", "L2"] and result.recorded_evictions == ["L1"]
    # the CLI: --param reaches the replayed policy; the evictions' agreement is its own line
    out = CliRunner().invoke(app, ["replay", str(log), "--stimuli", "--param", "source=job"])
    assert out.exit_code == 0, out.output
    assert "3 of 3 nominations agree (100.0%" in out.output
    assert "evictions: 1 of 1 agree (1 recorded, 1 replayed)" in out.output
    # without the restored attained service, L2 would rank as a fresh 3,600 s job: the replay must
    # rebuild what the re-created pod brought (recorded on its JobSubmitted line)
    from dlsched.service.record import read_events as events_of

    [again] = [e for e in events_of(log) if e["kind"] == "stimulus" and e["stimulus"] == "JobSubmitted"
               and e["uid"] == "L2"]
    assert (again["attained"], again["evictions"], again["start_time"] - T0, again["queue_delay"]) == (440.0, 1, 0.0, 0.0)


def test_the_re_created_pod_brings_its_attained_service_into_the_replay(tmp_path):
    from dlsched.service.record import job_from_fields

    job = job_from_fields({"uid": "L2", "vc": "default", "gpus": 4, "submit_time": 1.0, "attained": 440.0,
                           "evictions": 1, "start_time": 1.0, "queue_delay": 0.0})
    assert (job.attained, job.preemptions, job.submit_time, job.start_time, job.queue_delay) == (440.0, 1, 1.0, 1.0, 0.0)
    fresh = job_from_fields({"uid": "n", "vc": "default", "gpus": 4})
    assert (fresh.attained, fresh.preemptions) == (0.0, 0)


BORROW = """
[[queues]]
name = "A"
borrow_limit = 8
namespaces = ["team-a"]

[[queues]]
name = "B"
lend_limit = 8
namespaces = ["team-b"]
"""


class ConfigMap:
    def __init__(self, text: str) -> None:
        self.obj = {"metadata": {"resourceVersion": "1"}, "data": {"queues.toml": text}}

    def read(self) -> dict:
        return self.obj


def test_queues_that_borrow_and_reclaim_replay(tmp_path):
    """a1 borrows B's idle node; b0 (queue B) arrives and a1 is reclaimed; b0 runs on B's node."""
    log = tmp_path / "events.jsonl"
    core, clock, sent = recording_core(log, make_policy("fifo", "consolidate"), [("a-node", 8, "A"), ("b-node", 8, "B")])
    LiveQueues(core, "dlsched", "dlsched-queues", ConfigMap(BORROW).read, lambda message, reason: None).poll()
    assert core.quotas is not None
    for uid, node in (("a0", "a-node"), ("a1", "b-node")):
        clock.t += 1.0
        assert core.verdict(PodFacts(uid, "team-a", uid, 8, created=1.0), ["a-node", "b-node"])[0] == [node]
        bind(core, uid)
    clock.t += 1.0
    core.pod_seen(PodFacts("b0", "team-b", "b0", 8, created=2.0))
    core.run_pass()
    [intent] = sent
    assert intent.uid == "a1"
    core.eviction_sent(intent, "accepted")
    clock.t += 5.0
    core.pod_gone("a1")
    core.run_pass()
    assert core.jobs["b0"].state.name == "ASSUMED"
    core.recorder.close()
    result = replayed(log)
    assert_full_agreement(result, 3, evictions=1)
    assert [r[:2] for r in result.replayed] == [("a0", "a-node"), ("a1", "b-node"), ("b0", "b-node")]


def test_two_jobs_per_gpu_replay(tmp_path):
    """--max-jobs-per-gpu 2: co-located pods (predicted utilisation and memory) nominated on shared GPUs."""
    preds = {"small": (0.3, 4096.0), "big": (0.6, 12000.0)}

    def predict(job) -> None:
        job.pred_gpu_util, job.pred_gpu_mem_mib = preds[job.model_name]

    log = tmp_path / "events.jsonl"
    core, clock, _ = recording_core(log, make_policy("fifo", "consolidate", share=True),
                                    [("n1", 4, "default"), ("n2", 4, "default")], cap=2, predict=predict)
    script = [("a", 4, "small"), ("b", 4, "small"), ("c", 2, "big"), ("d", 4, "big"), ("e", 2, "small")]
    for i, (uid, gpus, model) in enumerate(script):
        clock.t += 1.0
        core.pod_seen(PodFacts(uid, "default", uid, gpus, created=float(i), annotations={"dlsched.io/model": model}))
        core.run_pass()
        for uid2, job in list(core.jobs.items()):
            if job.state.name == "ASSUMED":
                bind(core, uid2)
    clock.t += 10.0
    core.pod_gone("a")
    core.run_pass()
    core.recorder.close()
    starts = [e for e in read_events(log) if e["kind"] == "start"]
    assert len(starts) >= 5 and any(e["shared"] for e in starts)   # GPUs were shared: the cap of 2 was used
    result = replayed(log)
    assert result.replayed == [(e["uid"], e["node"], e["gpus"]) for e in starts]
    assert_full_agreement(result, len(starts))
