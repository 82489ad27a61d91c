"""The extender mode's binds and pod-watch echoes leave their rows to the service's group
committer (service/group_commit.py), as the scheduler mode's did: no bind request and no watch
event makes a flushed commit of its own (measured: docs/service.md, "The extender's commits"), and
the rows become durable on the committer's thread; without a committer a bind commits before it
returns, as before."""

from __future__ import annotations

import threading
import time

import pytest

from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.group_commit import THREAD_NAME, GroupCommitter
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.runtime import LiveService
from dlsched.service.store import Store

pytest.importorskip("sqlalchemy")


class Bridge:
    """The extender's API bridge, as far as a start and a bind reach it."""

    def reconcile(self):
        return "1", "1", {}

    def start(self, node_rv, pod_rv) -> None:
        pass

    def bind(self, namespace, name, uid, node, gpus, annotated=True, annotate=True):
        return ""

    def stop(self) -> None:
        pass


def pod(uid: str, gpus: int, node: str = "") -> PodFacts:
    return PodFacts(uid, "default", uid, gpus, node_name=node, phase="Running" if node else "Pending", created=1.0)


def _recording(store: Store) -> list[str]:
    """The names of the threads that call ``store.write_behind`` from now on."""
    callers: list[str] = []
    commit = store.write_behind

    def recorded() -> int:
        callers.append(threading.current_thread().name)
        return commit()
    store.write_behind = recorded
    return callers


def _durable(store: Store, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while store._binds_pending and time.monotonic() < deadline:
        time.sleep(0.02)
    assert store._binds_pending == 0


def _service(tmp_path) -> LiveService:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store(f"sqlite:///{tmp_path}/s.db"))
    core.node_seen(NodeFacts("n1", 8, "default", "", False))
    return LiveService(core, Bridge(), nudge=False)


def test_an_extender_bind_and_its_echo_are_committed_by_the_committer_thread(tmp_path):
    service = _service(tmp_path)
    core, store = service.core, service.core.store
    service.start()
    try:
        assert isinstance(service.committer, GroupCommitter) and service.committer.running
        callers = _recording(store)
        core.pod_seen(pod("p1", 2))
        core.run_pass()
        assert service.bind("default", "p1", "p1", "n1") == ""
        core.pod_seen(pod("p1", 2, node="n1"))        # the watch shows it bound
        assert threading.current_thread().name not in callers   # neither the bind nor the event committed
        _durable(store)
        assert set(callers) == {THREAD_NAME}
        assert {r["state"] for r in Store(f"sqlite:///{tmp_path}/s.db").assignment_rows()} == {"bound"}
        assert service.committer.groups >= 1
    finally:
        service.stop()


def test_binds_waiting_for_the_committer_share_its_commits(tmp_path):
    service = _service(tmp_path)
    core, store = service.core, service.core.store
    service.start()
    committer = service.committer
    try:
        release = threading.Event()
        commit = store.write_behind

        def held() -> int:   # the committer is busy while four binds come
            release.wait(5.0)
            return commit()
        store.write_behind = held
        for i in range(4):
            core.pod_seen(pod(f"p{i}", 2))
        core.run_pass()
        for i in range(4):
            assert service.bind("default", f"p{i}", f"p{i}", "n1") == ""
        before = committer.groups
        release.set()
        _durable(store)
        assert committer.groups - before <= 2   # four binds, one or two durable commits
    finally:
        service.stop()


def test_without_a_committer_a_bind_commits_before_it_returns(tmp_path):
    service = _service(tmp_path)   # not started: no committer
    core, store = service.core, service.core.store
    callers = _recording(store)
    core.pod_seen(pod("p1", 2))
    core.run_pass()
    assert service.bind("default", "p1", "p1", "n1") == ""
    assert callers == [threading.current_thread().name] and store._binds_pending == 0
    store.close()
