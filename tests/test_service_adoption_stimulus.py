"""Adoption of a bound pod is a kernel stimulus (``JobAdopted``): the live adapter books a pod
bound outside this process through ``Kernel.handle`` -- no state change behind the entry point --
the recorder writes it as a stimulus line, and ``replay --stimuli`` applies it through the same
handler (on a node cordoned since, too), agreeing with the service on every nomination."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.entry import Kernel
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import JobAdopted, JobSubmitted
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.feed import replay_stimuli
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.record import Recorder
from dlsched.service.store import Store


class Clock:
    def __init__(self, t: float = 1000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


def test_the_kernel_books_an_adopted_job_on_a_cordoned_node_and_keeps_it_cordoned():
    st = ClusterState(ClusterSpec.from_vc_sizes({"default": 1}, gpus_per_node=4), new_queue=make_policy("fifo").new_queue)
    kernel = Kernel(st, make_policy("fifo"))
    st.cordon(0, 0.0)
    job = Job("a", "default", 2, 0.0, float("nan"))
    kernel.handle(JobSubmitted(job), 1.0)
    assert kernel.handle(JobAdopted(job, ((0, 0b0110),)), 2.0) == []
    assert job.state is JobState.RUNNING and job.placement == ((0, 0b0110),)
    assert st.node_cordoned[0] and st.node_mask[0] == 0b0110 and st.n_running == 1
    loan = Job("b", "default", 1, 0.0, float("nan"))
    kernel.handle(JobSubmitted(loan), 3.0)
    with pytest.raises(StateError, match="no queues borrow"):
        kernel.handle(JobAdopted(loan, ((0, 0b0001),), borrowed=True), 4.0)
    assert st.node_cordoned[0]   # closed again after the refused booking


def test_a_bound_pod_is_adopted_through_the_kernel_and_replays_through_the_same_handler(tmp_path):
    path = tmp_path / "log.jsonl"
    clock = Clock()
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=clock, recorder=Recorder(path))
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    core.node_seen(NodeFacts("n2", 4, "default", "", False))
    core.node_seen(NodeFacts("n1", 4, "default", "", True))    # cordoned, with a pod bound there before
    bound = PodFacts("x", "default", "x", 2, node_name="n1", phase="Running", created=1.0,
                     annotations={"dlsched.io/gpus": "2,3"})
    core.pod_seen(bound)
    job = core.jobs["x"]
    assert job.state is JobState.RUNNING and job.placement == ((0, 0b1100),)
    assert core.state.node_cordoned[0] and core.slots["x"] == [(2, 0), (3, 0)]
    clock.t = 1010.0
    for uid in ("a", "b"):
        core.pod_seen(PodFacts(uid, "default", uid, 4, created=2.0))
    assert core.run_pass() == 1 and core.state.node_ids[core.jobs["a"].placement[0][0]] == "n2"
    core.recorder.close()
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    adopted = [e for e in lines if e.get("stimulus") == "JobAdopted"]
    assert adopted == [{"kind": "stimulus", "at": 1000.0, "stimulus": "JobAdopted", "uid": "x", "node": "n1",
                        "gpus": [2, 3], "borrowed": False}]
    kinds = [e.get("stimulus") or e["kind"] for e in lines]
    assert kinds.index("adopted") < kinds.index("JobAdopted") < kinds.index("start")
    agreement = replay_stimuli(path, make_policy)
    # an adoption is no nomination: a's is the one, on n2 (n1 is cordoned and half held in the replay too)
    assert agreement.replayed == agreement.recorded == [("a", "n2", [0, 1, 2, 3])] and agreement.rate == 1.0


def test_a_log_from_before_adoption_was_a_stimulus_still_replays(tmp_path):
    """Older logs have the 'adopted' line only: it is fed as the JobAdopted the service sends now."""
    path = tmp_path / "log.jsonl"
    core = SchedulerCore(make_policy("fifo"), Store("sqlite://"), clock=Clock(), recorder=Recorder(path))
    core.node_seen(NodeFacts("n1", 4, "default", "", False))
    core.pod_seen(PodFacts("x", "default", "x", 4, node_name="n1", phase="Running", created=1.0))
    core.pod_seen(PodFacts("a", "default", "a", 4, created=2.0))
    assert core.run_pass() == 0        # n1 is full: a waits
    core.recorder.close()
    old = [line for line in path.read_text().splitlines() if '"JobAdopted"' not in line]
    path.write_text("\n".join(old) + "\n")
    agreement = replay_stimuli(path, make_policy)
    assert agreement.replayed == [] and agreement.rate == 1.0   # a is not placed on the adopted pod's GPUs
