"""The kernel's entry point (kernel/entry.py): typed stimuli in, typed actions out.

The simulator's loop calls the same transitions and the same pass function directly; a small
driver that feeds a trace through ``Kernel.handle`` alone -- arrivals as JobSubmitted, finishes as
JobFinished, Bind actions answered by BindSucceeded, Timer actions as timers -- must make the
engine's decisions job for job.
"""

from __future__ import annotations

import pytest
from support.kernel_driver import feed

from dlsched.core.cluster import ClusterSpec, NodeSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.kernel.entry import Kernel
from dlsched.kernel.queues import ArrivalQueue
from dlsched.kernel.state import ClusterState, StateError
from dlsched.kernel.stimuli import (
    Bind,
    BindFailed,
    BindSucceeded,
    Evict,
    JobEvicted,
    JobSubmitted,
    NodeChanged,
    PassRequested,
    Postponed,
)
from dlsched.registry import make_policy
from dlsched.sched.indexes import make_view
from dlsched.sched.protocols import PolicyBase
from dlsched.sim import SimConfig, Simulator
from dlsched.traces.synthetic import generate


def drive(jobs: list[Job], cluster: ClusterSpec, policy) -> dict[str, tuple[float, tuple]]:
    """Simulate through Kernel.handle only (live: binds confirmed at once); returns job id ->
    (start time, first placement)."""
    state = ClusterState(cluster, new_queue=policy.new_queue)
    kernel = Kernel(state, policy, assume=True, view=make_view(state, policy))  # the driver attaches plug-ins
    kernel.prepare()
    return feed(kernel, jobs)


@pytest.mark.parametrize("policy", ["fifo", "sjf", "qssf", "horus", "las"])
def test_a_trace_fed_through_handle_makes_the_engines_decisions(policy: str) -> None:
    trace = generate(jobs=1500, seed=3, vcs={"a": 4, "b": 2})
    cluster = ClusterSpec.from_vc_sizes({"a": 4, "b": 2})
    result = Simulator(cluster, make_policy(policy), SimConfig()).run(trace.jobs)
    engine = {j.job_id: (j.start_time, None) for j in result.jobs}
    fed = drive(trace.jobs, cluster, make_policy(policy))
    assert len(fed) == len(engine) == 1500
    assert {k: v[0] for k, v in fed.items()} == {k: v[0] for k, v in engine.items()}


class _Evictor(PolicyBase):
    """Starts the head; when a second job arrives, preempts the first for it."""

    name = "evictor"

    def new_queue(self) -> ArrivalQueue:
        return ArrivalQueue()

    def schedule(self, view, vc):
        if vc.running and vc.pending:
            yield Preempt(next(iter(vc.running)))
            return
        if vc.pending:
            job = next(iter(vc.queue))
            yield Postpone(job, "testing") if job.job_id == "later" else Start(job, ((0, 1),))


def _one_node_state() -> ClusterState:
    return ClusterState(ClusterSpec([NodeSpec("n0", "vc", 1)], {"vc": 1}), new_queue=_Evictor().new_queue)


def test_live_eviction_is_a_request_until_the_job_is_gone() -> None:
    state = _one_node_state()
    kernel = Kernel(state, _Evictor(), assume=True)
    a, b = Job("a", "vc", 1, 0.0, 100.0), Job("b", "vc", 1, 5.0, 100.0)
    kernel.handle(JobSubmitted(a), 0.0)
    [bind] = kernel.handle(PassRequested(), 0.0)
    assert bind == Bind(a, ((0, 1),), False) and a.state is JobState.ASSUMED
    kernel.handle(BindSucceeded(a), 0.0)
    kernel.handle(JobSubmitted(b), 5.0)
    [evict] = kernel.handle(PassRequested(), 5.0)
    assert type(evict) is Evict and evict.job is a
    assert a.state is JobState.RUNNING and state.node_mask[0] == 1   # still holds its GPU
    kernel.handle(JobEvicted(a), 9.0)
    assert a.state is JobState.PENDING and state.node_mask[0] == 0 and a.preemptions == 1


def test_a_failed_bind_returns_the_gpus_and_the_next_pass_decides_again() -> None:
    state = _one_node_state()
    kernel = Kernel(state, _Evictor(), assume=True)
    a = Job("a", "vc", 1, 0.0, 100.0)
    kernel.handle(JobSubmitted(a), 0.0)
    kernel.handle(PassRequested(), 0.0)
    kernel.handle(BindFailed(a, "node gone"), 1.0)
    assert a.state is JobState.PENDING and state.node_mask[0] == 0 and a.start_time == -1.0
    assert kernel.pending_pass
    assert kernel.handle(PassRequested(), 1.0) == [Bind(a, ((0, 1),), False)]


def test_postponements_and_node_changes_come_through_handle() -> None:
    state = _one_node_state()
    kernel = Kernel(state, _Evictor(), assume=True)
    later = Job("later", "vc", 1, 0.0, 10.0)
    kernel.handle(JobSubmitted(later), 0.0)
    assert kernel.handle(PassRequested(), 0.0) == [Postponed(later, "testing")]
    assert state.postponed == 1
    kernel.handle(NodeChanged("added", spec=NodeSpec("n1", "vc", 2)), 1.0)
    assert state.node_gpus == [1, 2]
    kernel.handle(NodeChanged("cordoned", 1), 2.0)
    assert state.node_cordoned[1]
    with pytest.raises(StateError, match="unknown node change"):
        kernel.handle(NodeChanged("melted", 1), 3.0)
    with pytest.raises(StateError, match="unknown stimulus"):
        kernel.handle(("not", "a stimulus"), 3.0)
