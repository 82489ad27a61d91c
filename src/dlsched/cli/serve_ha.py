"""``dlsched serve --leader-elect``: the options of two or more replicas, checked, and the glue
that starts the election (the election itself is ``dlsched.service.leader``)."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("dlsched.service.leader")

SA_NAMESPACE_FILE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
WILDCARD_HOSTS = ("0.0.0.0", "::", "")


@dataclass(frozen=True)
class Election:
    """The checked leader-election options."""

    lease_name: str
    lease_namespace: str
    identity: str
    url: str
    lease_duration: float
    renew_deadline: float
    retry_period: float


def check_election(db: str, host: str, port: int, lease_name: str, lease_namespace: str | None,
                   identity: str | None, advertise_url: str | None, lease_duration: float, renew_deadline: float,
                   retry_period: float) -> Election:
    """ValueError naming the option for what cannot work with several replicas."""
    from dlsched.run.config import check_seconds
    from dlsched.service.leader import check_timings, default_identity

    if db.startswith("sqlite"):
        raise ValueError(f"--leader-elect needs a store every replica shares: --db {db} is a file of one "
                         "machine with a single writer; give --db postgresql+psycopg://USER:PASS@HOST:5432/DB")
    check_timings(lease_duration, renew_deadline, retry_period)   # nan fails its comparisons; inf may not:
    check_seconds("lease_duration", lease_duration, 0, above=True)
    check_seconds("renew_deadline", renew_deadline, 0, above=True)
    check_seconds("retry_period", retry_period, 0, above=True)
    if advertise_url is None:
        if host in WILDCARD_HOSTS:
            raise ValueError(f"--leader-elect with --host {host or repr(host)}: give --advertise-url, the URL the "
                             "other replicas forward calls to (e.g. http://$(POD_IP):8888)")
        advertise_url = f"http://{'[' + host + ']' if ':' in host else host}:{port}"
    if not advertise_url.startswith(("http://", "https://")):
        raise ValueError(f"--advertise-url: {advertise_url!r} is not an http:// or https:// URL")
    namespace = lease_namespace or os.environ.get("POD_NAMESPACE") or (
        SA_NAMESPACE_FILE.read_text().strip() if SA_NAMESPACE_FILE.is_file() else "default")
    return Election(lease_name, namespace, identity or default_identity(),
                    advertise_url.rstrip("/"), lease_duration, renew_deadline, retry_period)


def open_shared_store(store_cls, db: str, tries: int = 3):
    """The store, retried: two replicas starting together on an empty PostgreSQL both create the
    tables, and the one that loses that race gets an integrity error the first time."""
    import time

    for attempt in range(tries):
        try:
            return store_cls(db)
        except Exception:   # retried; the last failure is the caller's to report
            if attempt == tries - 1:
                raise
            time.sleep(0.5 + attempt)
    raise AssertionError("unreachable")


def _fatal(message: str) -> None:
    """Leave at once (as kube-scheduler does on losing its lease): a fresh start is a follower
    with an empty state, which rebuilds everything from the API server when it leads again."""
    print(f"dlsched serve: {message}; exiting", file=sys.stderr, flush=True)
    os._exit(1)


def start_election(service, core_api, election: Election):
    """Campaign for the Lease in a thread. On becoming leader the service reconciles with the API
    server and the shared store (its start-up path) before its core answers anything; on losing
    the lease the process exits."""
    from kubernetes import client

    from dlsched.service.kube import name_replica
    from dlsched.service.leader import LeaderElector, LeaseLock

    def started() -> None:
        try:
            found = service.start()
        except Exception as exc:  # noqa: BLE001 - a leader that cannot reconcile must not nominate
            _fatal(f"became leader but could not reconcile with the API server: {str(exc).splitlines()[0][:300]}")
            return
        print(f"dlsched serve: {election.identity} leads; reconciled with the API server: {found}",
              file=sys.stderr, flush=True)

    name_replica(core_api, election.identity)   # its writes are told apart in the API server's audit log
    lock = LeaseLock(client.CoordinationV1Api(core_api.api_client), election.lease_namespace, election.lease_name)
    elector = LeaderElector(lock, election.identity, election.url, election.lease_duration,
                            election.renew_deadline, election.retry_period, on_started=started,
                            on_stopped=lambda: _fatal(f"{election.identity} lost the lease "
                                                      f"{election.lease_namespace}/{election.lease_name}"))
    service.attach_elector(elector)
    elector.start()
    return elector
