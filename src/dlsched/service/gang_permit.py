"""The permit stage of a gang's binds: kube-scheduler binds pod by pod, each in its own
goroutine, so a gang pod's bind waits here until every pod of the gang has reached bind; the
last to arrive binds them all (all-or-nothing: when one bind fails, the pods already bound are
deleted and the gang's nomination is forgotten), and every waiting call returns its own pod's
outcome. The waits happen outside the service's lock."""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from typing import Protocol

from dlsched.core.job import JobState
from dlsched.service.gang_kube import delete_pod
from dlsched.service.gang_members import Gang
from dlsched.service.host import LiveHost
from dlsched.service.nominations import BindError
from dlsched.service.pods import PodFacts


class GangSide(Protocol):
    """What the permit uses of the gang table (:class:`dlsched.service.gangs.GangTable`)."""

    by_uid: dict[str, Gang]
    permit_timeout: float
    counters: Counter[str]
    last_bind: dict[str, dict]
    host: LiveHost

    def begin_bind(self, uid: str, node: str) -> tuple: ...

    def confirm(self, gang: Gang, kind: str) -> None: ...

    def member_gone(self, uid: str, why: str) -> None: ...

log = logging.getLogger("dlsched.service")

ASSUMED = JobState.ASSUMED
OUTCOMES_KEPT = 1000


class Permit:
    """The barrier of a gang's binds, per nomination (``ticket``: the gang's id and when it was
    nominated, so that a late call of an older nomination never binds a newer one)."""

    def __init__(self, gangs: GangSide) -> None:
        self.gangs = gangs
        self.cond = threading.Condition()
        self.arrived: dict[tuple, dict[str, float]] = {}
        self.outcomes: OrderedDict[tuple, dict[str, str] | None] = OrderedDict()

    def binding(self, gang_id: str) -> bool:
        """Whether pods of the gang are at the barrier or its binds are under way."""
        with self.cond:
            return any(t[0] == gang_id for t in self.arrived) or \
                any(t[0] == gang_id and o is None for t, o in self.outcomes.items())

    def bind(self, service, namespace: str, name: str, uid: str, node: str) -> str:
        """The bind verb of a gang's pod: waits (at most ``permit_timeout``) until every pod of
        the gang has reached bind; the last to arrive binds them all, deletes the bound ones if
        any bind fails, and every waiting call returns its own pod's outcome."""
        core, gangs = service.core, self.gangs
        with core.lock:
            try:
                pod, _ = gangs.begin_bind(uid, node)
            except BindError as exc:
                return str(exc)
            if (pod.namespace, pod.name) != (namespace, name):
                return f"uid {uid} is pod {pod.key}, not {namespace}/{name}"
            gang = gangs.by_uid[uid]
            ticket = (gang.id, gang.nominated_at)
            size = len(gang.places)
        deadline = time.monotonic() + gangs.permit_timeout
        with self.cond:
            decided = self.outcomes.get(ticket)
            if decided is not None:   # released or bound already: this call comes too late
                return decided.get(uid, decided.get("*", ""))
            arrived = self.arrived.setdefault(ticket, {})
            arrived[uid] = time.time()
            lead = len(arrived) == size and ticket not in self.outcomes
            if lead:
                self.outcomes[ticket] = None   # in progress
            else:
                while self.outcomes.get(ticket, None) is None:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self.cond.wait(left):
                        break
                outcome = self.outcomes.get(ticket)
                if outcome is not None:
                    return outcome.get(uid, outcome.get("*", ""))
                if ticket in self.outcomes:   # the leader is binding: wait for it without a limit
                    while self.outcomes.get(ticket) is None:
                        self.cond.wait(1.0)
                    outcome = self.outcomes[ticket]
                    return outcome.get(uid, outcome.get("*", ""))
                self.outcomes[ticket] = None   # timed out first: this call releases the gang
        if lead:
            outcome = self._bind_all(service, gang, ticket, arrived)
        else:
            why = (f"gang {gang.key}: {len(arrived)} of {size} pods reached bind within "
                   f"{gangs.permit_timeout:g} s; the gang's nomination is released")
            gangs.counters["gang permits timed out"] += 1
            with core.lock:
                job = core.jobs.get(gang.job_id)
                if job is not None and job.state is ASSUMED and gang.nominated_at == ticket[1]:
                    gangs.host.forget(job, why)
            outcome = {"*": why}
        with self.cond:
            self.outcomes[ticket] = outcome
            self.arrived.pop(ticket, None)
            while len(self.outcomes) > OUTCOMES_KEPT:
                self.outcomes.popitem(last=False)
            self.cond.notify_all()
        return outcome.get(uid, outcome.get("*", ""))

    def _bind_all(self, service, gang: Gang, ticket: tuple, arrived: dict[str, float]) -> dict[str, str]:
        """Bind every pod of the gang (the permit passed); all-or-nothing."""
        core, bridge, gangs = service.core, service.bridge, self.gangs
        with core.lock:
            job = core.jobs.get(gang.job_id)
            if job is None or job.state is not ASSUMED or gang.nominated_at != ticket[1]:
                return {"*": f"gang {gang.key}: its nomination was withdrawn while its pods reached bind"}
            todo = []
            for uid, (idx, _) in gang.places.items():
                pod = gang.members[uid]
                seen = uid not in core.unseen and core.key_uid.get(pod.key) == uid
                todo.append((pod, core.state.node_ids[idx], [g for g, _ in core.slots[uid]], seen))
        errors: dict[str, str] = {}
        done: list[PodFacts] = []
        for pod, node, gpus, seen in todo:
            if bridge is None:
                error = "no API server connected"
            elif seen:
                error = bridge.bind(pod.namespace, pod.name, pod.uid, node, gpus, annotate=False)
            else:
                error = bridge.bind(pod.namespace, pod.name, pod.uid, node, gpus, bool(pod.annotations))
            if error:
                errors[pod.uid] = error
                break
            done.append(pod)
        bound_at = time.time()
        if not errors:
            with core.lock:
                gangs.confirm(gang, "bind")
            gangs.counters["gangs bound"] += 1
            service.stats["binds"] += len(done)
            gangs.last_bind[gang.key] = {"pods": len(done), "last_arrival": max(p.created for p in gang.members.values()),
                                        "first_bind_call": min(arrived.values()), "bound": bound_at}
            return {p.uid: "" for p in done}
        (failed_uid, error), = errors.items()
        failed = next(p for p, *_ in todo if p.uid == failed_uid)
        why = f"gang {gang.key}: the bind of pod {failed.key} failed ({error}); all its pods are released"
        deleted = [p for p in done if not delete_pod(bridge, p)]
        gangs.counters["gang binds failed"] += 1
        service.stats["bind_failures"] += 1
        with core.lock:
            job = core.jobs.get(gang.job_id)
            if job is not None and job.state is ASSUMED:
                gangs.host.forget(job, why)
            for p in done:   # deleted: their controller makes new pods, which form the gang again
                gangs.member_gone(p.uid, why)
        if deleted:
            log.warning("%s; could not delete %s", why, ", ".join(p.key for p in deleted))
        return {"*": why}
