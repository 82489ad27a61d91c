"""Durable state of the live service: GPU slot assignments and the decision log (SQLAlchemy).

SQLite in WAL mode by default (``sqlite:///dlsched.db``), PostgreSQL by URL
(``postgresql+psycopg://user@host:port/db``). Every nomination (assume) inserts one row per
(node, GPU index, slot) in the same transaction as its decision-log entry, and the transaction
commits before the extender answers; the primary key on (node, gpu, slot) makes a double
assignment impossible, not merely unlikely: a second writer gets :class:`DoubleAssignment`.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable

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


class DoubleAssignment(RuntimeError):
    """A GPU slot is already assigned in the durable store (the uniqueness constraint fired)."""


Slots = Iterable[tuple[int, int]]   # (GPU index, slot)


def _sqlite_pragmas(dbapi_conn, _record) -> None:
    cur = dbapi_conn.cursor()
    cur.execute("PRAGMA journal_mode=WAL")
    cur.execute("PRAGMA synchronous=FULL")   # a commit survives a power cut, not only kill -9
    cur.execute("PRAGMA busy_timeout=5000")
    cur.close()


class Store:
    """Assignments and the decision log in one database; thread-safe (one writer at a time)."""

    def __init__(self, url: str = "sqlite:///dlsched.db") -> None:
        self.url = url
        kw: dict = {}
        if url.startswith("sqlite"):
            kw["connect_args"] = {"check_same_thread": False}
            if url in ("sqlite://", "sqlite:///:memory:"):
                kw["poolclass"] = StaticPool
        self.engine = create_engine(url, **kw)
        if url.startswith("sqlite"):
            event.listen(self.engine, "connect", _sqlite_pragmas)
        metadata.create_all(self.engine)
        self._lock = threading.Lock()

    def close(self) -> None:
        self.engine.dispose()

    # -- writes (each one transaction, committed before returning) -----------------------
    def assume(self, pod_uid: str, pod: str, node: str, slots: Slots, now: float, detail: str = "") -> None:
        rows = [{"node": node, "gpu": g, "slot": s, "pod_uid": pod_uid, "pod": pod, "state": "assumed",
                 "since": now} for g, s in slots]
        gpus = ",".join(str(g) for g, _ in slots)
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    conn.execute(insert(assignments), rows)
                    conn.execute(insert(decisions).values(at=now, kind="assume", pod_uid=pod_uid, pod=pod,
                                                          node=node, gpus=gpus, detail=detail))
            except IntegrityError as exc:
                raise DoubleAssignment(f"node {node} GPUs {gpus}: a slot is already assigned "
                                       f"(pod {pod})") from exc

    def bound(self, pod_uid: str, pod: str, node: str, gpus: str, now: float, kind: str = "bound",
              detail: str = "") -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(update(assignments).where(assignments.c.pod_uid == pod_uid).values(state="bound"))
            conn.execute(insert(decisions).values(at=now, kind=kind, pod_uid=pod_uid, pod=pod, node=node,
                                                  gpus=gpus, detail=detail))

    def release(self, pod_uid: str, pod: str, kind: str, now: float, detail: str = "") -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(delete(assignments).where(assignments.c.pod_uid == pod_uid))
            conn.execute(insert(decisions).values(at=now, kind=kind, pod_uid=pod_uid, pod=pod, node="",
                                                  gpus="", detail=detail))

    def log(self, kind: str, pod_uid: str, pod: str, now: float, node: str = "", gpus: str = "",
            detail: str = "") -> None:
        with self._lock, self.engine.begin() as conn:
            conn.execute(insert(decisions).values(at=now, kind=kind, pod_uid=pod_uid, pod=pod, node=node,
                                                  gpus=gpus, detail=detail))

    def adopt(self, pod_uid: str, pod: str, node: str, slots: Slots, now: float, detail: str = "") -> None:
        """A bound pod found at start-up or through the watch: its slots, as bound, replacing any
        rows it had (its earlier nomination)."""
        rows = [{"node": node, "gpu": g, "slot": s, "pod_uid": pod_uid, "pod": pod, "state": "bound",
                 "since": now} for g, s in slots]
        with self._lock:
            try:
                with self.engine.begin() as conn:
                    conn.execute(delete(assignments).where(assignments.c.pod_uid == pod_uid))
                    conn.execute(insert(assignments), rows)
                    conn.execute(insert(decisions).values(at=now, kind="adopt", pod_uid=pod_uid, pod=pod,
                                                          node=node, gpus=",".join(str(g) for g, _ in slots),
                                                          detail=detail))
            except IntegrityError as exc:
                raise DoubleAssignment(f"node {node}: a slot of pod {pod} is already assigned") from exc

    def reset_assignments(self, keep: set[str], now: float) -> int:
        """At start-up, after reconciling with the API server: drop every row whose pod is not in
        ``keep`` (nominations that were never bound, pods gone while the service was down)."""
        with self._lock, self.engine.begin() as conn:
            stale = [r.pod_uid for r in conn.execute(select(assignments.c.pod_uid).distinct())
                     if r.pod_uid not in keep]
            for uid in stale:
                conn.execute(delete(assignments).where(assignments.c.pod_uid == uid))
            if stale:
                conn.execute(insert(decisions).values(at=now, kind="reconcile", pod_uid="", pod="",
                                                      detail=json.dumps({"dropped": len(stale)})))
        return len(stale)

    # -- reads -----------------------------------------------------------------------------
    def assignment_rows(self) -> list[dict]:
        with self.engine.connect() as conn:
            return [dict(r._mapping) for r in conn.execute(select(assignments).order_by(
                assignments.c.node, assignments.c.gpu, assignments.c.slot))]

    def decision_counts(self) -> dict[str, int]:
        """Decisions logged so far, by kind (the metrics' counter: it survives restarts)."""
        with self.engine.connect() as conn:
            q = select(decisions.c.kind, func.count()).group_by(decisions.c.kind)
            return {kind: n for kind, n in conn.execute(q)}

    def recent_decisions(self, limit: int = 50) -> list[dict]:
        """The newest ``limit`` decisions, newest first (the dashboard's log)."""
        with self.engine.connect() as conn:
            q = select(decisions).order_by(decisions.c.id.desc()).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]

    def decision_log(self, limit: int = 100, after: int = 0) -> list[dict]:
        with self.engine.connect() as conn:
            q = select(decisions).where(decisions.c.id > after).order_by(decisions.c.id).limit(limit)
            return [dict(r._mapping) for r in conn.execute(q)]
