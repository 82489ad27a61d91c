"""ClusterState.withdraw: a job leaves for good (the live service's pod was deleted)."""

from __future__ import annotations

import pytest

from dlsched.core.cluster import ClusterSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel import ClusterState, StateError
from dlsched.kernel.queues import ArrivalQueue


def test_withdraw_pending_and_finished_jobs_but_never_one_holding_gpus():
    state = ClusterState(ClusterSpec.homogeneous(1, 4), new_queue=ArrivalQueue)
    a, b = Job("a", "default", 2, 0.0, 10.0), Job("b", "default", 2, 0.0, 10.0)
    state.submit(a, 0.0)
    state.submit(b, 0.0)
    state.withdraw(a, 1.0)                                  # pending: leaves the queue and the index
    vc = state.vcs[0]
    assert (vc.pending, state.n_pending, len(vc.queue), list(state.jobs)) == (1, 1, 1, ["b"])
    assert a.state is JobState.CREATED
    state.submit(Job("a", "default", 1, 2.0, 5.0), 2.0)     # the id may be used again
    state.start(b, ((0, 0b11),), 3.0, confirm=False)
    with pytest.raises(StateError, match="withdrawn while ASSUMED"):
        state.withdraw(b, 3.0)
    state.confirm(b, 4.0)
    with pytest.raises(StateError, match="withdrawn while RUNNING"):
        state.withdraw(b, 4.0)
    state.finish(b, 5.0)
    state.withdraw(b, 5.0)                                  # finished: only the index forgets it
    assert "b" not in state.jobs and state.finished == 1 and state.node_free[0] == 4
    state.check_invariants()
