"""Binds written behind the core's lock (Store.bound_later / write_behind): the commit runs after
the lock is let go, several binds share one durable transaction, a later write never overtakes a
recorded bind, and a ``kill -9`` between the bind and its row write is repaired by start-up's
adoption of the pods the API server shows bound."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("sqlalchemy")

from dlsched.registry import make_policy  # noqa: E402
from dlsched.service.core import SchedulerCore  # noqa: E402
from dlsched.service.pods import NodeFacts, PodFacts  # noqa: E402
from dlsched.service.store import Store  # noqa: E402

SRC = Path(__file__).resolve().parents[1] / "src"


def _pod(uid: str, gpus: int, node: str = "", gpu_text: str = "") -> PodFacts:
    ann = {"dlsched.io/gpus": gpu_text} if gpu_text else {}
    return PodFacts(uid, "default", f"pod-{uid}", gpus, node, "Running" if node else "Pending",
                    created=100.0 + int(uid[1:]), annotations=ann)


def _core(url: str) -> SchedulerCore:
    core = SchedulerCore(make_policy("fifo", "consolidate"), Store(url), clock=iter(range(1000, 10**6)).__next__)
    core.node_seen(NodeFacts("n1", 8, "default", "", False))
    return core


def _writes(store: Store, core: SchedulerCore | None = None) -> list[tuple[str, str, bool]]:
    """(statement's first words, synchronous mode, core lock held) of every write from now on."""
    from sqlalchemy import event

    mode: dict[int, str] = {}
    out: list[tuple[str, str, bool]] = []

    @event.listens_for(store.engine, "before_cursor_execute")
    def seen(conn, cursor, statement, *args):
        key = id(conn.connection.dbapi_connection)
        if statement.startswith("PRAGMA synchronous="):
            mode[key] = statement.split("=")[1]
        elif statement.split()[0] in ("INSERT", "UPDATE", "DELETE"):
            held = core is not None and core.lock._is_owned()
            out.append((" ".join(statement.split()[:3]), mode.get(key, "FULL"), held))
    return out


def test_a_bind_commits_durably_after_the_core_lock_is_let_go(tmp_path):
    core = _core(f"sqlite:///{tmp_path}/s.db")
    core.pod_seen(_pod("p1", 2))
    core.run_pass()
    core.begin_bind("p1", "n1")
    writes = _writes(core.store, core)
    core.end_bind("p1", "n1", "")
    # the bind's rows and log entry: one transaction, flushed (FULL), with the core's lock free
    assert writes == [("UPDATE assignments SET", "FULL", False), ("INSERT INTO decisions", "FULL", False)]
    assert {r["state"] for r in core.store.assignment_rows()} == {"bound"}
    assert [d["kind"] for d in core.store.decision_log()] == ["submit", "assume", "bind"]
    core.store.close()


def test_binds_waiting_share_one_transaction_and_a_later_write_never_overtakes_them(url):
    store = Store(url)
    for i, uid in enumerate(("a", "b", "c")):
        store.assume(uid, f"ns/{uid}", "n", [(i, 0)], 1.0 + i)
    for uid in ("a", "b", "c"):
        store.bound_later(uid, f"ns/{uid}", "n", "0", 5.0, kind="bind")
    assert {r["state"] for r in store.assignment_rows()} == {"bound"}   # a read writes them first
    store.bound_later("a", "ns/a", "n", "0", 6.0, kind="confirm")
    store.release("a", "ns/a", "finish", 7.0)   # the confirm recorded before it is written first
    assert [d["kind"] for d in store.decision_log()] == ["assume"] * 3 + ["bind"] * 3 + ["confirm", "finish"]
    assert [r["pod"] for r in store.assignment_rows()] == ["ns/b", "ns/c"]
    assert store.write_behind() == 0   # nothing left waiting
    store.close()


def test_write_behind_batches_the_binds_recorded_meanwhile(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    for i, uid in enumerate(("a", "b", "c")):
        store.assume(uid, f"ns/{uid}", "n", [(i, 0)], 1.0 + i)
    store.assume("d", "ns/d", "n", [(3, 0)], 4.0)
    store.bound_later("a", "ns/a", "n", "0", 5.0, kind="bind")
    store.release("d", "ns/d", "forget", 5.5)   # any later transaction writes a recorded bind first
    assert [d["kind"] for d in store.decision_log()][-2:] == ["bind", "forget"]
    for i, uid in enumerate(("b", "c")):
        store.bound_later(uid, f"ns/{uid}", "n", str(i + 1), 6.0, kind="bind")
    writes = _writes(store)
    assert store.write_behind() == 2
    assert {r["state"] for r in store.assignment_rows()} == {"bound"}
    assert writes == [("UPDATE assignments SET", "FULL", False), ("INSERT INTO decisions", "FULL", False)]
    assert store.write_behind() == 0 and len(writes) == 2
    store.close()


def test_a_pod_gone_is_released_after_the_core_lock_is_let_go(tmp_path):
    """A finished pod's release (its rows deleted, its memory rows forgotten) is written behind:
    durably, but with the core's lock free (on the code before, inside it)."""
    core = _core(f"sqlite:///{tmp_path}/s.db")
    core.pod_seen(_pod("p1", 2))
    core.run_pass()
    core.begin_bind("p1", "n1")
    core.end_bind("p1", "n1", "")
    writes = _writes(core.store, core)
    core.pod_gone("p1")
    assert ("DELETE FROM assignments", "FULL", False) in writes and writes[-1][0] == "INSERT INTO decisions"
    assert not any(held for *_, held in writes)
    assert core.store.write_behind() == 0 and core.store.assignment_rows() == []
    assert [d["kind"] for d in core.store.decision_log()] == ["submit", "assume", "bind", "finish"]
    core.store.close()


def test_a_recorded_release_is_written_before_a_nomination_of_its_slots(tmp_path):
    store = Store(f"sqlite:///{tmp_path}/s.db")
    store.assume("a", "ns/a", "n", [(0, 0)], 1.0)
    store.bound_later("a", "ns/a", "n", "0", 1.5, kind="bind")
    store.release_later("a", "ns/a", "finish", 2.0)
    store.assume("b", "ns/b", "n", [(0, 0)], 3.0)   # a's slot: its deferred delete goes first, no DoubleAssignment
    assert [(r["pod"], r["state"]) for r in store.assignment_rows()] == [("ns/b", "assumed")]
    assert [d["kind"] for d in store.decision_log()] == ["assume", "bind", "finish", "assume"]
    assert store._binds_pending == 0
    store.close()


CHILD = """
import os, signal
from dlsched.registry import make_policy
from dlsched.service.core import SchedulerCore
from dlsched.service.pods import NodeFacts, PodFacts
from dlsched.service.store import Store

core = SchedulerCore(make_policy("fifo", "consolidate"), Store({url!r}), clock=iter(range(1000, 10**6)).__next__)
core.node_seen(NodeFacts("n1", 8, "default", "", False))
for uid, gpus in (("p1", 4), ("p2", 2)):
    core.pod_seen(PodFacts(uid, "default", f"pod-{{uid}}", gpus, "", "Pending", created=100.0 + int(uid[1:])))
core.run_pass()
_, gpus = core.begin_bind("p1", "n1")
print("gpus", ",".join(map(str, gpus)), flush=True)
# the Binding was answered; the process dies before the bind's row is written
Store.write_behind = lambda self: os.kill(os.getpid(), signal.SIGKILL)
core.end_bind("p1", "n1", "")
"""


def test_kill_between_the_binding_and_its_row_write_is_repaired_by_adoption(tmp_path):
    url = f"sqlite:///{tmp_path}/crash.db"
    env = dict(os.environ, PYTHONPATH=str(SRC), OMP_NUM_THREADS="1")
    child = subprocess.run([sys.executable, "-c", textwrap.dedent(CHILD.format(url=url))], env=env,
                           capture_output=True, text=True, timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    gpus = child.stdout.split()[1]
    assert gpus == "0,1,2,3"
    left = Store(url)   # what the crash left: p1's rows still assumed, no bind entry
    assert {r["pod"]: r["state"] for r in left.assignment_rows()} == {"default/pod-p1": "assumed",
                                                                     "default/pod-p2": "assumed"}
    assert "bind" not in left.decision_counts()
    left.close()
    # restart: the API server lists p1 bound (the Binding carried its GPUs), p2 still pending
    core = _core(url)
    core.pod_seen(_pod("p1", 4, node="n1", gpu_text=gpus))
    core.pod_seen(_pod("p2", 2))
    core.pod_seen(_pod("p3", 2))
    assert core.store.reset_assignments({"p1"}, core.now()) == 1   # p2's nomination, never bound
    core.run_pass()
    rows = core.store.assignment_rows()
    slots = [(r["gpu"], r["slot"]) for r in rows]
    assert len(slots) == len(set(slots)) == 8   # no GPU handed out twice
    assert {r["pod"]: r["state"] for r in rows} == {"default/pod-p1": "bound", "default/pod-p2": "assumed",
                                                      "default/pod-p3": "assumed"}
    assert sorted(r["gpu"] for r in rows if r["pod"] == "default/pod-p1") == [0, 1, 2, 3]
    assert core.store.decision_counts()["adopt"] == 1   # the row rebuilt from the API server's pod
    core.state.check_invariants()
    core.store.close()
