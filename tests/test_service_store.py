"""The durable store on SQLite (WAL) and on a real PostgreSQL server: a GPU slot can be assigned
once only (the primary key, not the code, forbids it), writes are atomic, state reloads, and a
restarted core rebuilds its occupancy from the API server's pods without reusing a slot."""

from __future__ import annotations

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy  # noqa: E402
from dlsched.service.core import SchedulerCore  # noqa: E402
from dlsched.service.pods import NodeFacts, PodFacts  # noqa: E402
from dlsched.service.store import DoubleAssignment, Store  # noqa: E402

# the `url` fixture (SQLite and PostgreSQL): tests/support/store_fixtures.py, a plugin of tests/conftest.py


def test_a_slot_is_assigned_once_and_the_failed_write_leaves_nothing(url):
    store = Store(url)
    store.assume("u1", "ns/a", "n1", [(0, 0), (1, 0)], 1.0)
    with pytest.raises(DoubleAssignment):
        store.assume("u2", "ns/b", "n1", [(2, 0), (1, 0)], 2.0)   # GPU 1 slot 0 is taken
    rows = store.assignment_rows()
    assert [(r["node"], r["gpu"], r["slot"], r["pod"]) for r in rows] == [("n1", 0, 0, "ns/a"), ("n1", 1, 0, "ns/a")]
    assert [d["kind"] for d in store.decision_log()] == ["assume"]   # the refused one logged nothing
    store.assume("u2", "ns/b", "n1", [(1, 1)], 3.0)                  # another slot of GPU 1: allowed
    store.release("u1", "ns/a", "finish", 4.0)
    store.assume("u3", "ns/c", "n1", [(0, 0)], 5.0)                  # freed slot reused
    store.close()
    again = Store(url)                                               # reload: same rows, same log
    assert [(r["gpu"], r["slot"], r["pod"]) for r in again.assignment_rows()] == [(0, 0, "ns/c"), (1, 1, "ns/b")]
    assert [d["kind"] for d in again.decision_log()] == ["assume", "assume", "finish", "assume"]
    assert again.reset_assignments({"u3"}, 6.0) == 1
    assert [r["pod"] for r in again.assignment_rows()] == ["ns/c"]
    again.close()


def test_two_stores_on_one_database_cannot_double_assign(url):
    a, b = Store(url), Store(url)
    a.assume("u1", "ns/a", "n1", [(3, 0)], 1.0)
    with pytest.raises(DoubleAssignment):
        b.assume("u9", "ns/z", "n1", [(3, 0)], 1.0)
    a.close()
    b.close()


def test_sqlite_runs_in_wal_mode(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/wal.db")
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
    store.close()


def _pod(uid: str, gpus: int, node: str = "", gpu_text: str = "", created: float = 0.0) -> PodFacts:
    ann = {"dlsched.io/gpus": gpu_text} if gpu_text else {}
    return PodFacts(uid, "default", f"pod-{uid}", gpus, node, "Running" if node else "Pending",
                    created=created or 100.0 + int(uid[1:]), annotations=ann)


def _core(url: str) -> SchedulerCore:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store(url), clock=iter(range(1000, 10**6)).__next__)
    core.node_seen(NodeFacts("n1", 8, "default", "", False))
    return core


def test_restart_rebuilds_from_bound_pods_and_never_reuses_their_slots(url):
    core = _core(url)
    core.pod_seen(_pod("p1", 4))
    core.pod_seen(_pod("p2", 2))
    core.run_pass()
    _, gpus1 = core.begin_bind("p1", "n1")
    core.end_bind("p1", "n1", "")          # p1 bound on GPUs 0-3; p2 only nominated when the process dies
    assert gpus1 == [0, 1, 2, 3]
    core.store.close()
    # restart: the API server lists p1 bound (annotated), p2 pending, and p3 that arrived meanwhile
    core = _core(url)
    core.pod_seen(_pod("p1", 4, node="n1", gpu_text="0,1,2,3"))
    core.pod_seen(_pod("p2", 2))
    core.pod_seen(_pod("p3", 2))
    assert core.store.reset_assignments({"p1"}, core.now()) == 1      # p2's old nomination dropped
    core.run_pass()
    rows = core.store.assignment_rows()
    slots = [(r["gpu"], r["slot"]) for r in rows]
    assert len(slots) == len(set(slots)) == 8
    assert {r["pod"]: r["state"] for r in rows} == {"default/pod-p1": "bound", "default/pod-p2": "assumed",
                                                      "default/pod-p3": "assumed"}
    assert sorted(g for r in rows if r["pod"] == "default/pod-p1" for g in [r["gpu"]]) == [0, 1, 2, 3]
    core.state.check_invariants()
    core.store.close()


def test_only_nominations_commit_without_waiting_for_the_disk(tmp_path):
    """SQLite: a nomination's transaction runs under synchronous=NORMAL, every other write under
    FULL (tracked per connection from the statements each one executed); a submit entry is
    written by the next transaction, ahead of its rows."""
    from sqlalchemy import event

    store = Store(f"sqlite:///{tmp_path}/store.db")
    mode: dict[int, str] = {}
    writes: list[tuple[str, str]] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def seen(conn, cursor, statement, *args):
        key = id(conn.connection.dbapi_connection)
        if statement.startswith("PRAGMA synchronous="):
            mode[key] = statement.split("=")[1]
        elif statement.split()[0] in ("INSERT", "UPDATE", "DELETE"):
            writes.append((" ".join(statement.split()[:3]), mode.get(key, "FULL")))

    store.log("submit", "p1", "default/p1", 1.0)
    assert writes == []                                    # deferred
    store.assume("p1", "default/p1", "n", [(0, 0)], 2.0)
    store.bound("p1", "default/p1", "n", "0", 3.0, kind="bind")
    store.assume("p2", "default/p2", "n", [(1, 0)], 4.0)
    store.release("p2", "default/p2", "forget", 5.0)
    assert writes == [("INSERT INTO decisions", "NORMAL"), ("INSERT INTO assignments", "NORMAL"),
                      ("INSERT INTO decisions", "NORMAL"),
                      ("UPDATE assignments SET", "FULL"), ("INSERT INTO decisions", "FULL"),
                      ("INSERT INTO assignments", "NORMAL"), ("INSERT INTO decisions", "NORMAL"),
                      ("DELETE FROM assignments", "FULL"), ("INSERT INTO decisions", "FULL")]
    assert [d["kind"] for d in store.decision_log()] == ["submit", "assume", "bind", "assume", "forget"]
    store.close()


def test_a_writer_stopped_inside_a_transaction_blocks_the_next_leader_only_briefly(postgres_url):
    """A leader paused (SIGSTOP, a frozen VM) in the middle of a transaction keeps its row locks
    while its connection lives: before the fix the next leader's start-up waited on them until the
    old one was resumed (the paused-leader test on the real control plane, one run in two). The
    server now ends a session left idle inside a transaction, so the other store's write goes
    through after about that long, and the paused writer's rows are rolled back."""
    import time

    from sqlalchemy import insert

    from dlsched.service.store import assignments, metadata

    clean = Store(postgres_url)
    metadata.drop_all(clean.engine)
    clean.close()
    paused, leader = Store(postgres_url, idle_in_transaction_s=1.0), Store(postgres_url, idle_in_transaction_s=1.0)
    conn = paused.engine.connect()
    tx = conn.begin()
    conn.execute(insert(assignments).values(node="n1", gpu=0, slot=0, pod_uid="old", pod="ns/old",
                                            state="assumed", since=1.0))
    t0 = time.monotonic()
    leader.assume("u1", "ns/a", "n1", [(0, 0)], 2.0)   # the same slot: waits on the paused row lock
    waited = time.monotonic() - t0
    assert 0.5 < waited < 10.0, waited
    assert [(r["pod"], r["gpu"]) for r in leader.assignment_rows()] == [("ns/a", 0)]   # the paused row rolled back
    with pytest.raises(Exception):   # noqa: B017 - the paused session was ended by the server
        tx.commit()
    conn.close()
    paused.close()
    leader.close()
