"""Leader election on a Kubernetes Lease (``coordination.k8s.io/v1``), for two or more replicas.

Only one replica may nominate and bind: the one holding the Lease. The algorithm is client-go's
(``tools/leaderelection``), written against the official client's ``CoordinationV1Api``:

* every ``retry_period`` a replica reads the Lease. A holder's lease counts as expired only when
  the record has not changed for ``lease_duration`` seconds *of this replica's own monotonic
  clock* (from when it first saw that record), so no two machines' clocks are ever compared;
* a replica takes or renews the Lease with a ``replace`` carrying the ``resourceVersion`` it read:
  the API server refuses (409) a write based on a version someone else changed meanwhile, so two
  replicas that both saw the lease expire cannot both win;
* the leader counts as leader only while its last successful renewal is younger than
  ``renew_deadline`` (< ``lease_duration``): checked at the moment of use, so a leader whose
  renewals hang stops acting before any other replica can take the Lease;
* a leader that stops gracefully releases the Lease (holder emptied), so a follower takes over
  at its next try instead of waiting for the expiry.

The holder advertises the URL the other replicas forward extender and operator calls to in the
annotation ``dlsched.io/leader-url`` of the Lease.
"""

from __future__ import annotations

import json
import logging
import os
import random
import socket
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

log = logging.getLogger("dlsched.service.leader")

URL_ANNOTATION = "dlsched.io/leader-url"
DEFAULT_LEASE_DURATION = 10.0
DEFAULT_RENEW_DEADLINE = 7.0
DEFAULT_RETRY_PERIOD = 1.0


def default_identity() -> str:
    """``NAME_suffix`` (NAME: ``$POD_NAME``, else the host name), new for every process: a restarted
    container of the same pod must not take its predecessor's lease as its own, and two
    processes with one identity would both believe they hold the lease."""
    return f"{os.environ.get('POD_NAME') or socket.gethostname()}_{uuid.uuid4().hex[:8]}"


def check_timings(lease_duration: float, renew_deadline: float, retry_period: float) -> None:
    """ValueError naming the option when the three durations cannot work together."""
    if not retry_period > 0:
        raise ValueError(f"--retry-period must be > 0 seconds, got {retry_period}")
    if not renew_deadline > retry_period:
        raise ValueError(f"--renew-deadline ({renew_deadline} s) must be longer than --retry-period "
                         f"({retry_period} s): a leader needs more than one try to renew")
    if not lease_duration > renew_deadline:
        raise ValueError(f"--lease-duration ({lease_duration} s) must be longer than --renew-deadline "
                         f"({renew_deadline} s): a leader must stop before another replica may take the lease")


def _micro_time(at: float) -> str:
    """A ``MicroTime`` as the API server writes it: ``2026-11-26T20:40:02.123456Z``."""
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease says (``resource_version`` is the version it was read at, '' when absent)."""

    holder: str = ""
    url: str = ""
    duration: int = 0
    transitions: int = 0
    acquire_time: str = ""
    renew_time: str = ""
    resource_version: str = ""

    @classmethod
    def from_json(cls, obj: dict) -> LeaseRecord:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        return cls(str(spec.get("holderIdentity") or ""), str((meta.get("annotations") or {}).get(URL_ANNOTATION, "")),
                   int(spec.get("leaseDurationSeconds") or 0), int(spec.get("leaseTransitions") or 0),
                   str(spec.get("acquireTime") or ""), str(spec.get("renewTime") or ""),
                   str(meta.get("resourceVersion") or ""))


class LeaseLock:
    """Get / create / replace one Lease as raw JSON through ``CoordinationV1Api``."""

    def __init__(self, api, namespace: str, name: str, timeout: float = 5.0) -> None:
        self.api, self.namespace, self.name, self.timeout = api, namespace, name, timeout

    def get(self) -> LeaseRecord | None:
        """The Lease, or None when it does not exist."""
        from kubernetes.client.exceptions import ApiException

        try:
            resp = self.api.read_namespaced_lease(self.name, self.namespace, _preload_content=False,
                                                  _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return LeaseRecord.from_json(json.loads(resp.data))

    def _body(self, rec: LeaseRecord) -> dict:
        meta: dict = {"name": self.name, "namespace": self.namespace, "annotations": {URL_ANNOTATION: rec.url}}
        if rec.resource_version:
            meta["resourceVersion"] = rec.resource_version
        spec: dict = {"holderIdentity": rec.holder, "leaseDurationSeconds": rec.duration,
                      "leaseTransitions": rec.transitions}
        if rec.acquire_time:
            spec["acquireTime"] = rec.acquire_time
        if rec.renew_time:
            spec["renewTime"] = rec.renew_time
        return {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta, "spec": spec}

    def write(self, rec: LeaseRecord) -> LeaseRecord | None:
        """Create the Lease (``rec.resource_version`` empty) or replace it at that version; the
        record as stored, or None when the API server refused it as a conflict (409: someone else
        created or changed it first)."""
        from kubernetes.client.exceptions import ApiException

        try:
            if rec.resource_version:
                resp = self.api.replace_namespaced_lease(self.name, self.namespace, self._body(rec),
                                                         _preload_content=False, _request_timeout=self.timeout)
            else:
                resp = self.api.create_namespaced_lease(self.namespace, self._body(rec), _preload_content=False,
                                                        _request_timeout=self.timeout)
        except ApiException as exc:
            if exc.status == 409:
                return None
            raise
        return LeaseRecord.from_json(json.loads(resp.data))


class LeaderElector:
    """Campaigns for the Lease in a thread; ``is_leader`` is the gate every nomination and bind
    passes. ``on_started`` runs (in its own thread, while renewals go on) when this replica becomes
    leader; ``on_stopped`` when it loses the lease after having held it."""

    def __init__(self, lock: LeaseLock, identity: str, url: str = "",
                 lease_duration: float = DEFAULT_LEASE_DURATION, renew_deadline: float = DEFAULT_RENEW_DEADLINE,
                 retry_period: float = DEFAULT_RETRY_PERIOD, on_started: Callable[[], None] | None = None,
                 on_stopped: Callable[[], None] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        check_timings(lease_duration, renew_deadline, retry_period)
        self.lock, self.identity, self.url = lock, identity, url
        self.lease_duration, self.renew_deadline, self.retry_period = lease_duration, renew_deadline, retry_period
        self.on_started, self.on_stopped = on_started, on_stopped
        self.clock = clock
        self.observed: LeaseRecord | None = None   # the last record read or written
        self.observed_at = 0.0                     # when it last changed (own monotonic clock)
        self._renewed_at: float | None = None      # last successful acquire/renew while leading
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.terms = 0                             # times this replica became leader
        self.became_leader_at: float | None = None   # wall time of the last acquisition
        self.errors = 0                            # failed Lease reads/writes (API errors)
        self.stale_writes_skipped = 0              # Lease writes not sent: stale read or past the deadline

    # -- the gate --------------------------------------------------------------------------
    @property
    def is_leader(self) -> bool:
        at = self._renewed_at
        return at is not None and self.clock() - at < self.renew_deadline

    def leader(self) -> tuple[str, str]:
        """(identity, URL) of the holder this replica last saw; ('', '') when none is known or
        its lease has expired by this replica's clock."""
        if self.is_leader:
            return self.identity, self.url
        rec = self.observed
        if rec is None or not rec.holder or self._expired(rec):
            return "", ""
        return rec.holder, rec.url

    def _expired(self, rec: LeaseRecord) -> bool:
        return self.observed_at + max(rec.duration, 1) <= self.clock()

    # -- one try ---------------------------------------------------------------------------
    def try_acquire_or_renew(self) -> bool:
        """One read and (when allowed) one write of the Lease; True when this replica holds it now."""
        now_wall, now = time.time(), self.clock()
        old = self.lock.get()
        read_at = self.clock()   # a slow answer is no stall: what counts is the time from here to the write
        if old is None:
            rec = LeaseRecord(self.identity, self.url, round(self.lease_duration), 0,
                              _micro_time(now_wall), _micro_time(now_wall))
            return self._written(self.lock.write(rec), now)
        if self.observed is None or old.resource_version != self.observed.resource_version:
            # timed from when the read returned, not from before it: a replica stopped inside the
            # read would otherwise see the new leader's fresh record as long expired and take it
            self.observed, self.observed_at = old, read_at
        mine = old.holder == self.identity
        if old.holder and not mine and not self._expired(old):
            return self._written(None, now)
        if not self._may_write(read_at, mine):
            return False
        rec = LeaseRecord(self.identity, self.url, round(self.lease_duration),
                          old.transitions if mine else old.transitions + 1,
                          old.acquire_time if mine and old.acquire_time else _micro_time(now_wall),
                          _micro_time(now_wall), old.resource_version)
        return self._written(self.lock.write(rec), now)

    def _may_write(self, read_at: float, renewal: bool) -> bool:
        """Whether the write this try decided on may still be sent: not when the process stood
        still since the Lease was read (SIGSTOP, a frozen VM: what it read may be stale by now,
        and the other replicas may have taken over meanwhile), nor a renewal once the renew
        deadline has passed (this replica stopped leading then; it campaigns afresh instead).
        No write of a deposed leader reaches the API server (issue 33, point 4)."""
        now = self.clock()
        if now - read_at > self.retry_period:
            self.stale_writes_skipped += 1
            return False
        at = self._renewed_at
        if renewal and at is not None and now - at >= self.renew_deadline:
            self.stale_writes_skipped += 1
            return False
        return True

    def _written(self, rec: LeaseRecord | None, now: float) -> bool:
        if rec is None:
            return False
        self.observed, self.observed_at = rec, now
        if rec.holder == self.identity:
            self._renewed_at = now
            return True
        return False

    # -- the loop ----------------------------------------------------------------------------
    def start(self) -> None:
        self._thread = threading.Thread(target=self.run, name="dlsched-leader-election", daemon=True)
        self._thread.start()

    def run(self) -> None:
        """Acquire (retrying every ``retry_period`` with jitter), then renew until the lease is
        lost or :meth:`stop`; then campaign again."""
        while not self._stop.is_set():
            if not self._attempt():
                self._stop.wait(self.retry_period * (1 + 0.2 * random.random()))
                continue
            self.terms += 1
            self.became_leader_at = time.time()
            log.warning("%s became the leader (lease %s/%s)", self.identity, self.lock.namespace, self.lock.name)
            if self.on_started is not None:
                threading.Thread(target=self.on_started, name="dlsched-leader-start", daemon=True).start()
            while not self._stop.wait(self.retry_period):
                if not self._renew():
                    break
            if self._stop.is_set():
                return
            self._renewed_at = None
            log.warning("%s lost the lease %s/%s", self.identity, self.lock.namespace, self.lock.name)
            if self.on_stopped is not None:
                self.on_stopped()

    def _attempt(self) -> bool:
        try:
            return self.try_acquire_or_renew()
        except Exception as exc:  # noqa: BLE001 - the API server may be unreachable for a while
            self.errors += 1
            log.warning("lease %s/%s: %s", self.lock.namespace, self.lock.name, str(exc).splitlines()[0][:200])
            return False

    def _renew(self) -> bool:
        """Keep trying until the renewal succeeds or the renew deadline passes."""
        while not self._stop.is_set():
            if self._attempt():
                return True
            if not self.is_leader:
                return False
            self._stop.wait(self.retry_period / 4)
        return True

    def stop(self, release: bool = True) -> None:
        """Stop campaigning; a leader releases the Lease (holder emptied) so a follower takes over
        at its next try. ``release=False`` leaves it to expire, as a crash would."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(self.lock.timeout + self.retry_period + 1)
        was_leader, self._renewed_at = self.is_leader, None
        if release and was_leader and self.observed is not None:
            rec = self.observed
            try:
                self.lock.write(LeaseRecord("", "", 1, rec.transitions, rec.acquire_time,
                                            _micro_time(time.time()), rec.resource_version))
            except Exception as exc:  # noqa: BLE001 - the lease then expires on its own
                log.warning("could not release the lease: %s", str(exc).splitlines()[0][:200])

    def status(self) -> dict:
        """What /api/v1/state, /api/v1/leader and the metrics show."""
        holder, url = self.leader()
        rec = self.observed
        return {"identity": self.identity, "is_leader": self.is_leader, "leader": holder or None,
                "leader_url": url or None, "lease": f"{self.lock.namespace}/{self.lock.name}",
                "lease_transitions": rec.transitions if rec else None, "terms": self.terms,
                "became_leader_at": self.became_leader_at, "lease_errors": self.errors,
                "lease_writes_skipped": self.stale_writes_skipped,
                "lease_duration_s": self.lease_duration, "renew_deadline_s": self.renew_deadline,
                "retry_period_s": self.retry_period}
