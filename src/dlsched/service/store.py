"""Durable state of the live service: GPU slot assignments, the decision log and eviction
intents (SQLAlchemy).

SQLite in WAL mode by default (``sqlite:///dlsched.db``), PostgreSQL by URL
(``postgresql+psycopg://user@host:port/db``). Every nomination (assume) inserts one row per
(node, GPU index, slot) in the same transaction as its decision-log entry, and the transaction
commits before the extender answers; the primary key on (node, gpu, slot) makes a double
assignment impossible, not merely unlikely: a second writer gets :class:`DoubleAssignment`.

Nominations are committed without waiting for the disk (SQLite ``synchronous=NORMAL`` in WAL
mode, PostgreSQL ``synchronous_commit=off``): atomic, visible to every other connection and
checked by the constraint, but a power cut may lose the last ones, which a restart drops anyway
(it keeps only pods the API server shows bound). Log-only entries (``submit``) are written by the
next transaction, before its own rows, or by the next read. Every other write (bind, confirm,
adopt, release, reconcile, an eviction intent and its completion) waits for the disk, and with it
everything committed before it. An eviction intent is committed before the Eviction API is called,
so a restart completes it rather than deciding it again (docs/service.md).

A bind (and a watch's confirm) is recorded in memory by :meth:`Store.bound_later`, which waits
for no commit, and written by :meth:`Store.write_behind` once the caller has let go of the core's
lock (several binds in one durable transaction), or else by the next transaction or read. Why:
under the core's lock a bind's flushed commit (10 ms alone, far more under load) held back every
filter and every other bind. Safe because the API server, not the store, is the truth for a
bound pod: a crash before the write leaves the pod's rows ``assumed``, and start-up adopts the
pod bound and rewrites them (docs/service.md). The release of a pod that ended or is gone is
recorded the same way (:meth:`Store.release_later`): its rows are deleted by the next
transaction before that transaction's own rows, so a nomination of the freed slots never meets
them, and a crash before the write leaves rows of a pod the API server no longer shows, which
start-up drops. Nominations, the other releases and eviction intents are never written behind:
they commit before their effect.

SQLite's checkpoints (the WAL copied into the database file, with an fsync of each) run in a
thread of their own every second, not inside whichever commit crossed the WAL's size limit: that
commit, on the extender's path, used to wait 20-70 ms for it. Durability is the same: a commit is
durable once in the WAL, which a restart replays.

What the node agents taught about GPU memory (corrected predictions, the calibration's peaks:
``memory_corrections``, ``memory_peaks``, service/memory_kept.py) is committed as a nomination is,
by one transaction per agent post, each table bounded (the oldest rows dropped and counted).
"""

from __future__ import annotations

import json
import logging
import threading
import weakref
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from sqlalchemy import (
    Column,
    Float,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.exc import IntegrityError
from sqlalchemy.pool import StaticPool

metadata = MetaData()

assignments = Table(
    "assignments", metadata,
    Column("node", String(253), primary_key=True),
    Column("gpu", Integer, primary_key=True),
    Column("slot", Integer, primary_key=True),
    Column("pod_uid", String(64), nullable=False, index=True),
    Column("pod", String(512), nullable=False),
    Column("state", String(16), nullable=False),       # assumed | bound
    Column("since", Float, nullable=False),
)

decisions = Table(
    "decisions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", Float, nullable=False),
    Column("kind", String(16), nullable=False),        # submit assume bind bound forget finish withdraw adopt ...
    Column("pod_uid", String(64), nullable=False),
    Column("pod", String(512), nullable=False),
    Column("node", String(253), nullable=False, default=""),
    Column("gpus", String(256), nullable=False, default=""),
    Column("detail", Text, nullable=False, default=""),
)

# A gang's nomination (service/gangs.py): each pod's node and GPUs, kept until the gang is bound
# whole or released, so that a restart can complete or release a gang left partly bound.
gang_members = Table(
    "gang_members", metadata,
    Column("pod_uid", String(64), primary_key=True),
    Column("gang", String(300), nullable=False, index=True),
    Column("pod", String(512), nullable=False),
    Column("node", String(253), nullable=False),
    Column("gpus", String(256), nullable=False),
    Column("since", Float, nullable=False),
)


evictions = Table(
    "evictions", metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("pod_uid", String(64), nullable=False, index=True),
    Column("pod", String(512), nullable=False),
    Column("decision_id", Integer, nullable=False),      # the ``evict`` entry of the decision log
    Column("for_pod", String(512), nullable=False, default=""),
    Column("reason", Text, nullable=False, default=""),
    Column("grace_s", Integer, nullable=False),
    Column("state", String(16), nullable=False),        # pending (intent written) | done (API called)
    Column("at", Float, nullable=False),
    Column("outcome", Text, nullable=False, default=""),
)

# What the node agents taught the service about memory, so that a restart (or a new leader) does
# not predict it from scratch again and co-locate a pod where it ran out of memory
# (service/memory_kept.py). A pod's job is keyed by its uid (service/podbook.job_of), so are its
# corrected predicted memory (an agent reading after the warm-up, an OOM failover, a co-runner's
# correction) and its peak as the cluster's memory calibration counted it (its raw and given
# predictions, the calibration's key and job signature). Each table keeps the newest
# ``Store.memory_kept`` rows (by ``at``, the last write): older ones are dropped and counted.
memory_corrections = Table(
    "memory_corrections", metadata,
    Column("pod_uid", String(64), primary_key=True),
    Column("pod", String(512), nullable=False),
    Column("gpu_mem_mib", Float, nullable=False),
    Column("why", String(16), nullable=False),          # observe | oom | partner
    Column("at", Float, nullable=False, index=True),
)

memory_peaks = Table(
    "memory_peaks", metadata,
    Column("pod_uid", String(64), primary_key=True),
    Column("cal_key", String(300), nullable=False),     # gpu|stack|family (stack_calibration.cluster_key)
    Column("signature", String(600), nullable=False, default=""),
    Column("raw_mib", Float, nullable=False),            # the model's prediction
    Column("given_mib", Float, nullable=False),          # the calibrated one the pod was given
    Column("peak_mib", Float, nullable=False),           # its largest reading
    Column("at", Float, nullable=False, index=True),
)

MEMORY_KEPT = 20_000   # rows kept in each memory table; the oldest past it are dropped and counted
ENDED_KINDS = ("finish", "withdraw", "time_limit")   # a release after which the pod's uid never returns
LOG_ONLY, BIND, RELEASE, ENDED = range(4)            # what a deferred entry does when written

INSERT_ASSIGNMENTS = insert(assignments)   # built once: executing them reuses the compiled statement
INSERT_DECISION = insert(decisions)


def _decision(at: float, kind: str, pod_uid: str, pod: str, node: str = "", gpus: str = "",
              detail: str = "") -> dict:
    return {"at": at, "kind": kind, "pod_uid": pod_uid, "pod": pod, "node": node, "gpus": gpus, "detail": detail}


class DoubleAssignment(RuntimeError):
    """A GPU slot is already assigned in the durable store (the uniqueness constraint fired)."""


Slots = Iterable[tuple[int, int]]   # (GPU index, slot)


def _sqlite_pragmas(dbapi_conn, record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")   # a commit survives a power cut, not only kill -9
    cur.execute("PRAGMA busy_timeout=5000")
    cur.execute("PRAGMA wal_autocheckpoint=0")   # the Checkpointer's thread checkpoints instead
    cur.close()
    record.info["synchronous"] = "FULL"      # what Store._write last set on this connection


CHECKPOINT_EVERY_S = 1.0


WAL_MAX_FRAMES = 16_000   # ≈ 64 MB of 4-KiB pages: past this, a checkpoint may make writers wait


def _checkpoint(engine) -> bool:
    """One checkpoint (TRUNCATE past ``WAL_MAX_FRAMES``); False once the engine is gone."""
    if engine is None:
        return False
    try:
        with engine.connect() as conn:
            _, frames, _ = conn.exec_driver_sql("PRAGMA wal_checkpoint(PASSIVE)").one()
            if frames > WAL_MAX_FRAMES:
                conn.exec_driver_sql("PRAGMA wal_checkpoint(TRUNCATE)")
    except Exception as exc:  # noqa: BLE001 - a failed checkpoint is retried; the WAL keeps the data
        logging.getLogger(__name__).warning("WAL checkpoint failed: %s", exc)
    return True


class Checkpointer:
    """Checkpoints an SQLite database's WAL every ``CHECKPOINT_EVERY_S`` from a daemon thread.
    PASSIVE: it copies what no reader still needs and never blocks a writer (sqlite3 releases the
    GIL while it runs). The WAL starts over only after a checkpoint that copied all of it, so
    under writes without a pause it would grow for ever: past ``WAL_MAX_FRAMES`` the checkpoint is
    TRUNCATE, which waits for the writer in progress and holds the next one back until done."""

    def __init__(self, engine) -> None:
        self._stop = threading.Event()
        # the thread holds the engine weakly: a Store dropped without close() does not keep it
        # (and a connection) alive, and the thread ends with it
        self._thread = threading.Thread(target=self._run, args=(weakref.ref(engine), self._stop),
                                        name="dlsched-wal-checkpoint", daemon=True)
        self._thread.start()

    @staticmethod
    def _run(engine_ref: weakref.ref, stop: threading.Event) -> None:
        while not stop.wait(CHECKPOINT_EVERY_S) and _checkpoint(engine_ref()):
            pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


IDLE_IN_TRANSACTION_S = 5.0   # PostgreSQL ends a session left this long inside a transaction


class Store:
    """Assignments and the decision log in one database; thread-safe (one writer at a time)."""

    def __init__(self, url: str = "sqlite:///dlsched.db",
                 idle_in_transaction_s: float = IDLE_IN_TRANSACTION_S, memory_kept: int = MEMORY_KEPT) -> None:
        self.url = url
        self.memory_kept = memory_kept
        self._memory_rows: dict[str, int] = {}   # table -> rows it holds, counted at its first write
        kw: dict = {}
        if url.startswith("postgresql"):
            # a replica stopped (SIGSTOP, a frozen VM) inside a transaction keeps its row locks for
            # as long as its TCP connection lives: the next leader's start-up would wait on them
            # for ever (measured: half the paused-leader runs, until the old one was resumed). The
            # server ends such a session after this long, which also fences the paused writer.
            kw["connect_args"] = {"options": f"-c idle_in_transaction_session_timeout={int(idle_in_transaction_s * 1000)}"}
        if url.startswith("sqlite"):
            kw["connect_args"] = {"check_same_thread": False}
            if url in ("sqlite://", "sqlite:///:memory:"):
                kw["poolclass"] = StaticPool
        self.engine = create_engine(url, **kw)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        metadata.create_all(self.engine)
        in_file = url.startswith("sqlite") and "poolclass" not in kw   # an in-memory database has no WAL
        self._checkpointer = Checkpointer(self.engine) if in_file else None
        self._lock = threading.Lock()   # one writer at a time; held through a commit
        self._dialect = self.engine.dialect.name
        # entries not written yet, in order: (log entry, what it does: LOG_ONLY, BIND, RELEASE, ENDED);
        # under _pending_lock, which no commit holds, so that recording one never waits for the disk
        self._deferred: list[tuple[dict, int]] = []
        self._pending_lock = threading.Lock()
        self._binds_pending = 0   # binds and releases among _deferred: written durably

    @contextmanager
    def _write(self, durable: bool = True) -> Iterator:
        """One transaction (the caller holds ``_lock``), starting with the deferred log entries;
        ``durable=False`` commits without waiting for the disk (see above)."""
        with self._pending_lock:
            deferred = list(self._deferred)
        with self.engine.begin() as conn:
            if self._dialect == "sqlite":   # a pragma runs outside pysqlite's implicit transaction
                want, info = "FULL" if durable else "NORMAL", conn.connection.info
                if info.get("synchronous") != want:   # set per connection: only when it changes
                    conn.exec_driver_sql(f"PRAGMA synchronous={want}")
                    info["synchronous"] = want
            elif self._dialect == "postgresql" and not durable:
                conn.exec_driver_sql("SET LOCAL synchronous_commit TO OFF")
            if deferred:
                self._write_deferred(conn, deferred)
            yield conn
        if deferred:   # committed (a rolled-back transaction leaves them deferred)
            with self._pending_lock:
                del self._deferred[:len(deferred)]
                self._binds_pending -= sum(what != LOG_ONLY for _, what in deferred)

    def _write_deferred(self, conn, deferred: list[tuple[dict, int]]) -> None:
        """The recorded binds' rows bound, then the recorded releases' rows deleted (a bind and a
        later release of one pod: no rows; a release and a later bind of one pod cannot share a
        batch, the nomination between them being a transaction), then their log entries."""
        binds = [entry["pod_uid"] for entry, what in deferred if what == BIND]
        if binds:
            conn.execute(update(assignments).where(assignments.c.pod_uid.in_(binds)).values(state="bound"))
        gone = [entry["pod_uid"] for entry, what in deferred if what in (RELEASE, ENDED)]
        if gone:
            conn.execute(delete(assignments).where(assignments.c.pod_uid.in_(gone)))
            ended = [entry["pod_uid"] for entry, what in deferred if what == ENDED]
            if ended:
                self._forget_memory(conn, ended)
        conn.execute(INSERT_DECISION, [entry for entry, _ in deferred])

    def _flush(self) -> None:
        """Write the deferred entries (before a read, so that it sees them); durably when a bind
        is among them."""
        if self._deferred:
            with self._lock:
                if self._deferred:
                    with self._write(durable=self._binds_pending > 0):
                        pass

    def write_behind(self) -> int:
        """Commit the binds recorded by :meth:`bound_later` (and the log entries before them) in
        one durable transaction; returns how many binds it wrote (0: none waiting, or another
        thread's commit took them). Call it without holding the core's lock."""
        if not self._binds_pending:
            return 0
        with self._lock:
            n = self._binds_pending
            if n:
                with self._write():
                    pass
            return n

    def close(self) -> None:
        self._flush()
        if self._checkpointer is not None:
            self._checkpointer.stop()
        self.engine.dispose()   # the last connection to close checkpoints what is left

    # -- writes (each one transaction, committed before returning) -----------------------
    def assume(self, pod_uid: str, pod: str, node: str, slots: Slots, now: float, detail: str = "") -> None:
        rows = [{"node": node, "gpu": g, "slot": s, "pod_uid": pod_uid, "pod": pod, "state": "assumed",
                 "since": now} for g, s in slots]
        gpus = ",".join(str(g) for g, _ in slots)
        with self._lock:
            try:
                with self._write(durable=False) as conn:
                    conn.execute(INSERT_ASSIGNMENTS, rows)
                    conn.execute(INSERT_DECISION, _decision(now, "assume", pod_uid, pod, node, gpus, detail))
            except IntegrityError as exc:
                raise DoubleAssignment(f"node {node} GPUs {gpus}: a slot is already assigned "
                                       f"(pod {pod})") from exc

    def bound(self, pod_uid: str, pod: str, node: str, gpus: str, now: float, kind: str = "bound",
              detail: str = "") -> None:
        with self._lock, self._write() as conn:
            conn.execute(update(assignments).where(assignments.c.pod_uid == pod_uid).values(state="bound"))
            conn.execute(INSERT_DECISION, _decision(now, kind, pod_uid, pod, node, gpus, detail))

    def bound_later(self, pod_uid: str, pod: str, node: str, gpus: str, now: float, kind: str = "bound",
                    detail: str = "") -> None:
        """:meth:`bound`, recorded in memory now and written by :meth:`write_behind`, the next
        transaction or the next read (see above): it never waits for a commit."""
        with self._pending_lock:
            self._deferred.append((_decision(now, kind, pod_uid, pod, node, gpus, detail), BIND))
            self._binds_pending += 1

    def release(self, pod_uid: str, pod: str, kind: str, now: float, detail: str = "") -> None:
        """A pod's rows go (``kind``: finish, withdraw, oom, forget ...); a pod that ended
        (``ENDED_KINDS``) takes its memory correction along: its uid never returns."""
        with self._lock, self._write() as conn:
            conn.execute(delete(assignments).where(assignments.c.pod_uid == pod_uid))
            if kind in ENDED_KINDS:
                self._forget_memory(conn, [pod_uid])
            conn.execute(INSERT_DECISION, _decision(now, kind, pod_uid, pod, detail=detail))

    def release_later(self, pod_uid: str, pod: str, kind: str, now: float, detail: str = "") -> None:
        """:meth:`release`, recorded in memory now and written as :meth:`bound_later` is (see
        above): for a pod that ended or is gone, whose release must not hold the core's lock
        through a flushed commit."""
        what = ENDED if kind in ENDED_KINDS else RELEASE
        with self._pending_lock:
            self._deferred.append((_decision(now, kind, pod_uid, pod, detail=detail), what))
            self._binds_pending += 1

    def log(self, kind: str, pod_uid: str, pod: str, now: float, node: str = "", gpus: str = "",
            detail: str = "") -> None:
        """A log-only entry (``submit``): written by the next transaction or read (see above)."""
        with self._pending_lock:
            self._deferred.append((_decision(now, kind, pod_uid, pod, node, gpus, detail), LOG_ONLY))

    def adopt(self, pod_uid: str, pod: str, node: str, slots: Slots, now: float, detail: str = "") -> None:
        """A bound pod found at start-up or through the watch: its slots, as bound, replacing any
        rows it had (its earlier nomination)."""
        rows = [{"node": node, "gpu": g, "slot": s, "pod_uid": pod_uid, "pod": pod, "state": "bound",
                 "since": now} for g, s in slots]
        with self._lock:
            try:
                with self._write() as conn:
                    conn.execute(delete(assignments).where(assignments.c.pod_uid == pod_uid))
                    conn.execute(INSERT_ASSIGNMENTS, rows)
                    conn.execute(INSERT_DECISION, _decision(now, "adopt", pod_uid, pod, node,
                                                            ",".join(str(g) for g, _ in slots), detail))
            except IntegrityError as exc:
                raise DoubleAssignment(f"node {node}: a slot of pod {pod} is already assigned") from exc

    # -- gangs (service/gangs.py) -----------------------------------------------------------
    def assume_gang(self, gang: str, pods: list[tuple[str, str, str, Slots]], now: float, detail: str = "") -> None:
        """A gang's nomination, every pod ``(uid, pod, node, slots)`` in one transaction (all or
        none), recorded in ``gang_members`` too; durable before any of its pods is bound."""
        rows, members, log = [], [], []
        for uid, pod, node, slots in pods:
            slots = list(slots)
            gpus = ",".join(str(g) for g, _ in slots)
            rows += [{"node": node, "gpu": g, "slot": s, "pod_uid": uid, "pod": pod, "state": "assumed",
                      "since": now} for g, s in slots]
            members.append({"pod_uid": uid, "gang": gang, "pod": pod, "node": node, "gpus": gpus, "since": now})
            log.append(_decision(now, "assume", uid, pod, node, gpus, f"{detail} gang={gang}".strip()))
        with self._lock:
            try:
                with self._write() as conn:
                    conn.execute(delete(gang_members).where(gang_members.c.pod_uid.in_([m["pod_uid"] for m in members])))
                    conn.execute(INSERT_ASSIGNMENTS, rows)
                    conn.execute(insert(gang_members), members)
                    conn.execute(INSERT_DECISION, log)
            except IntegrityError as exc:
                raise DoubleAssignment(f"gang {gang}: a slot of one of its pods is already assigned") from exc

    def bound_gang(self, gang: str, pods: list[tuple[str, str, str, str]], now: float, kind: str = "bind") -> None:
        """Every pod ``(uid, pod, node, gpus)`` of the gang bound: its rows bound, its record gone."""
        uids = [uid for uid, *_ in pods]
        with self._lock, self._write() as conn:
            conn.execute(update(assignments).where(assignments.c.pod_uid.in_(uids)).values(state="bound"))
            conn.execute(delete(gang_members).where(gang_members.c.gang == gang))
            conn.execute(INSERT_DECISION, [_decision(now, kind, uid, pod, node, gpus, f"gang={gang}")
                                           for uid, pod, node, gpus in pods])

    def release_gang(self, gang: str, uids: list[str], now: float, detail: str = "") -> None:
        """A gang's nomination forgotten: its pods' rows and its record go."""
        with self._lock, self._write() as conn:
            if uids:
                conn.execute(delete(assignments).where(assignments.c.pod_uid.in_(uids)))
            conn.execute(delete(gang_members).where(gang_members.c.gang == gang))
            conn.execute(INSERT_DECISION, _decision(now, "gang_release", gang, gang.partition(":")[2], detail=detail))

    def release_pods(self, uids: list[str], kind: str, now: float, detail: str = "") -> None:
        """Pods of a running gang that ended: their rows go (the gang's job runs on)."""
        with self._lock, self._write() as conn:
            conn.execute(delete(assignments).where(assignments.c.pod_uid.in_(uids)))
            if kind in ENDED_KINDS:
                self._forget_memory(conn, uids)
            conn.execute(INSERT_DECISION, [_decision(now, kind, uid, "", detail=detail) for uid in uids])

    def gang_records(self) -> dict[str, list[dict]]:
        """Gang nominations not yet bound whole nor released: gang -> its pods' rows."""
        self._flush()
        out: dict[str, list[dict]] = {}
        with self.engine.connect() as conn:
            for r in conn.execute(select(gang_members).order_by(gang_members.c.gang, gang_members.c.pod)):
                out.setdefault(r.gang, []).append(dict(r._mapping))
        return out

    def drop_gang(self, gang: str, now: float, detail: str = "") -> None:
        """The start-up recovery settled a gang: its record goes, with why."""
        with self._lock, self._write() as conn:
            conn.execute(delete(gang_members).where(gang_members.c.gang == gang))
            conn.execute(INSERT_DECISION, _decision(now, "gang_recover", gang, gang.partition(":")[2], detail=detail))

    def reset_assignments(self, keep: set[str], now: float) -> int:
        """At start-up, after reconciling with the API server: drop every row whose pod is not in
        ``keep`` (nominations that were never bound, pods gone while the service was down)."""
        with self._lock, self._write() as conn:
            stale = [r.pod_uid for r in conn.execute(select(assignments.c.pod_uid).distinct())
                     if r.pod_uid not in keep]
            for uid in stale:
                conn.execute(delete(assignments).where(assignments.c.pod_uid == uid))
            if stale:
                conn.execute(INSERT_DECISION, _decision(now, "reconcile", "", "",
                                                        detail=json.dumps({"dropped": len(stale)})))
        return len(stale)

    # -- what the agents taught about memory (service/memory_kept.py) ---------------------------
    def keep_memory(self, corrections: list[dict], peaks: list[dict]) -> int:
        """Rows of ``memory_corrections`` and ``memory_peaks`` written (a pod's row replaced), in one
        transaction committed as a nomination is (without waiting for the disk: a ``kill -9``
        keeps it, a power cut may lose the last ones, and the agents report again). Returns how
        many of the oldest rows were dropped to keep ``memory_kept`` per table."""
        dropped = 0
        with self._lock, self._write(durable=False) as conn:
            for table, rows in ((memory_corrections, corrections), (memory_peaks, peaks)):
                if rows:
                    dropped += self._upsert(conn, table, rows)
        return dropped

    def _upsert(self, conn, table: Table, rows: list[dict]) -> int:
        name = table.name
        if name not in self._memory_rows:
            self._memory_rows[name] = conn.execute(select(func.count()).select_from(table)).scalar_one()
        replaced = conn.execute(delete(table).where(table.c.pod_uid.in_([r["pod_uid"] for r in rows]))).rowcount
        conn.execute(insert(table), rows)
        self._memory_rows[name] += len(rows) - max(replaced, 0)
        if self._memory_rows[name] <= self.memory_kept:
            return 0
        # another replica may have written since the count: count again before choosing what goes
        n = conn.execute(select(func.count()).select_from(table)).scalar_one()
        old = [r.pod_uid for r in conn.execute(select(table.c.pod_uid).order_by(table.c.at, table.c.pod_uid)
                                               .limit(max(n - self.memory_kept, 0)))]
        if old:
            conn.execute(delete(table).where(table.c.pod_uid.in_(old)))
        self._memory_rows[name] = n - len(old)
        return len(old)

    def _forget_memory(self, conn, uids: list[str]) -> None:
        gone = conn.execute(delete(memory_corrections).where(memory_corrections.c.pod_uid.in_(uids))).rowcount
        if memory_corrections.name in self._memory_rows and gone > 0:
            self._memory_rows[memory_corrections.name] -= gone

    def forget_memory(self, uids: list[str]) -> None:
        """At start-up: the corrections of pods the API server no longer shows go."""
        if uids:
            with self._lock, self._write() as conn:
                self._forget_memory(conn, uids)

    def memory_rows(self) -> tuple[list[dict], list[dict]]:
        """(corrections, peaks), each oldest first."""
        self._flush()
        with self.engine.connect() as conn:
            return tuple([dict(r._mapping) for r in conn.execute(select(t).order_by(t.c.at, t.c.pod_uid))]
                         for t in (memory_corrections, memory_peaks))

    # -- eviction intents (written before the Eviction API is called: docs/service.md) ----------
    def evict_intent(self, pod_uid: str, pod: str, for_pod: str, reason: str, grace_s: int, now: float) -> int:
        """Record the intent to evict ``pod`` (durable, with its ``evict`` decision-log entry)
        before any API call, so that a restart completes it instead of deciding it again.
        Returns the intent's id."""
        detail = f"evicted {pod} for {for_pod or '(no pending pod named)'}: {reason} (grace {grace_s} s)"
        with self._lock, self._write() as conn:
            did = conn.execute(INSERT_DECISION, _decision(now, "evict", pod_uid, pod, detail=detail)).inserted_primary_key[0]
            return conn.execute(insert(evictions), {
                "pod_uid": pod_uid, "pod": pod, "decision_id": did, "for_pod": for_pod, "reason": reason,
                "grace_s": grace_s, "state": "pending", "at": now, "outcome": ""}).inserted_primary_key[0]

    def evict_done(self, intent_id: int, outcome: str, now: float) -> bool:
        """Mark an intent done (the API call was made, or the pod was gone); False when it was
        done already (nothing is written twice)."""
        with self._lock, self._write() as conn:
            row = conn.execute(select(evictions).where(evictions.c.id == intent_id)).first()
            if row is None or row.state == "done":
                return False
            conn.execute(update(evictions).where(evictions.c.id == intent_id).values(state="done", outcome=outcome))
            conn.execute(INSERT_DECISION, _decision(now, "evicted", row.pod_uid, row.pod,
                                                    detail=f"intent {intent_id}: {outcome}"))
            return True

    def eviction_rows(self, state: str | None = None, limit: int = 10_000) -> list[dict]:
        """Eviction intents, oldest first (``state``: only pending or only done ones); the newest
        ``limit`` of them."""
        self._flush()
        with self.engine.connect() as conn:
            q = select(evictions).order_by(evictions.c.id.desc()).limit(limit)
            if state is not None:
                q = q.where(evictions.c.state == state)
            return [dict(r._mapping) for r in conn.execute(q)][::-1]

    # -- reads -----------------------------------------------------------------------------
    def assignment_rows(self) -> list[dict]:
        self._flush()
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(assignments).order_by(
                assignments.c.node, assignments.c.gpu, assignments.c.slot))]

    def decision_counts(self) -> dict[str, int]:
        """Decisions logged so far, by kind (the metrics' counter: it survives restarts)."""
        self._flush()
        with self.engine.connect() as conn:
            q = select(decisions.c.kind, func.count()).group_by(decisions.c.kind)
            return {kind: n for kind, n in conn.execute(q)}

    def recent_decisions(self, limit: int = 50) -> list[dict]:
        """The newest ``limit`` decisions, newest first (the dashboard's log)."""
        self._flush()
        with self.engine.connect() as conn:
            q = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]

    def decision_log(self, limit: int = 100, after: int = 0) -> list[dict]:
        self._flush()
        with self.engine.connect() as conn:
            q = select(decisions).where(decisions.c.id > after).order_by(decisions.c.id).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]
