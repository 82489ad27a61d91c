"""Gangs: the pods of one distributed training job, scheduled live as one kernel job (issue 26).

A PyTorchJob, MPIJob, JobSet or indexed Job is several pods; placed pod by pod it can be half
placed and hold GPUs that nothing uses while the rest waits (a deadlock when two such jobs each
hold half the cluster). Here the pods of a gang become one kernel job only once they have all
arrived: its GPU count is the sum of their requests, and the policy's pass places it exactly as
the simulator places a job of that size (several nodes where it spans them). The placement is
then split into the pods' node-local shares and every pod is nominated -- one store transaction
for all of them. kube-scheduler binds pod by pod, each in its own goroutine, so the extender's
bind verb is the *permit* stage: a gang pod's bind waits until every pod of the gang has reached
bind, then all are bound; when one bind fails, the pods already bound are deleted (a bound pod
cannot be unbound; their controller recreates them) and the gang is forgotten.

Membership (first match): the coscheduling convention (``scheduling.k8s.io/group-name`` or
``pod-group.scheduling.sigs.k8s.io[/name]``, label or annotation), dlsched's own ``dlsched.io/job``,
then the pod's owner: a JobSet (``jobset.sigs.k8s.io/jobset-name``) or an indexed Job (a
controller owner of kind Job and a completion index). The size is ``dlsched.io/min-member`` (or
the coscheduling ``pod-group.scheduling.sigs.k8s.io/min-available``); a gang by group name
without it is an error the pod waits with; ``dlsched.io/job`` or an owner without it is no gang
(its pods are scheduled one by one, as before; ``dlsched.io/job`` alone names a single-pod job,
which is how a preempted job's re-created pod is matched to it: service/evictions.py).

The parts: membership and the split of a placement (:mod:`~dlsched.service.gang_members`), the
permit barrier (:mod:`~dlsched.service.gang_permit`), the API calls (:mod:`~dlsched.service.gang_kube`);
this table ties N pods to one kernel job through the adapter's small interface
(:class:`~dlsched.service.host.LiveHost`).

Crash safety: the nomination records every pod's node and GPUs (``gang_members`` in the store).
At start-up (:func:`dlsched.service.gang_recovery.recover`), a gang with some pods bound and some not is *completed*: the rest
are bound to their recorded nodes and GPUs; when that is not possible (a pod gone, its GPUs
taken, a bind refused), the bound ones are deleted (*released*). A gang with no pod bound is
simply decided again.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Callable

from dlsched.core.job import JobState
from dlsched.kernel.decisions import Fit, Status
from dlsched.kernel.stimuli import BindSucceeded
from dlsched.sched.pods import no_room_reason, pod_room
from dlsched.service.gang_kube import delete_pod, kube_warner
from dlsched.service.gang_members import (
    GANG_PREFIX,
    Gang,
    GangError,
    Membership,
    cut_into_pods,
    is_gang_id,
    membership,
    split_placement,
    vc_room,
)
from dlsched.service.gang_permit import OUTCOMES_KEPT, Permit
from dlsched.service.host import LiveHost
from dlsched.service.nominations import BindError, gpu_text
from dlsched.service.pods import PodFacts

log = logging.getLogger("dlsched.service")

ASSUMED, RUNNING, PENDING = JobState.ASSUMED, JobState.RUNNING, JobState.PENDING


class GangTable:
    """The service's gangs: membership, the kernel jobs of complete gangs, nominations split into
    pods, arrival time-outs and the permit barrier of their binds. Called by the adapter under the
    service's lock (the hooks marked ``gang hook``), except :meth:`bind`, which takes the lock
    itself and waits outside it (:class:`~dlsched.service.gang_permit.Permit`)."""

    def __init__(self, host: LiveHost, arrival_timeout: float = 120.0, permit_timeout: float = 8.0) -> None:
        self.host, self.book, self.noms = host, host.book, host.noms
        self.arrival_timeout = arrival_timeout   # seconds until a gang still missing pods is reported
        self.permit_timeout = permit_timeout     # seconds a gang pod's bind waits for the others
        self.forming: dict[str, Gang] = {}       # key -> the instance whose pods are arriving
        self.by_job: dict[str, Gang] = {}        # kernel job id -> instance
        self.by_uid: dict[str, Gang] = {}        # member pod uid -> instance
        self.seq: Counter[str] = Counter()
        self.counters: Counter[str] = Counter()
        self.last_bind: dict[str, dict] = {}     # gang key -> timings of its last all-or-nothing bind
        # (pod, reason, message) -> a Warning Event on the pod; set when an API server is connected
        # (kube_warner); called under the core's lock, so it must not block
        self.warn: Callable[[PodFacts, str, str], None] | None = None
        self.unsent: list[tuple[PodFacts, str, str]] = []   # warnings said before ``warn`` was connected
        self.unsplit: dict[str, str] = {}   # gang job -> why its pods of different sizes found no room
        # member pods first seen before this process answered extender calls (a start-up, a new
        # leader): kube-scheduler's last answer for them was not ours (a 503, a refused call), so
        # they may sit in its unschedulable queue; uid -> (when last nudged, nudges sent)
        self.unknown: dict[str, tuple[float, int]] = {}
        self.permit = Permit(self)   # the barrier of the gangs' binds

    # -- membership ---------------------------------------------------------------------
    def admit(self, pod: PodFacts) -> bool:
        """A pending pod the core would submit: True when it is a gang's (kept here, and the
        gang's job submitted once it is complete), False for a pod on its own."""
        if is_gang_id(pod.uid):
            return False
        gang = self.by_uid.get(pod.uid)
        if gang is not None:
            gang.members[pod.uid] = pod
            return True
        try:
            m = membership(pod)
        except GangError as exc:
            self.book.parked[pod.uid] = pod
            self.book.waiting[pod.uid] = str(exc)
            self.counters["gang pods with bad labels"] += 1
            return True
        if m is None:
            return False
        now = self.host.now()
        gang = self.forming.get(m.key)
        if gang is None:
            self.seq[m.key] += 1
            gang = self.forming[m.key] = Gang(m.key, m.size, m.source, self.seq[m.key], first_at=now)
        elif gang.size != m.size:
            self.counters["gang pods disagreeing on the size"] += 1
        self.book.parked.pop(pod.uid, None)
        gang.members[pod.uid] = pod
        if not self.noms.serving:
            self.unknown.setdefault(pod.uid, (0.0, 0))
        gang.last_at = now
        self.by_uid[pod.uid] = gang
        self.book.waiting[pod.uid] = gang.forming_reason()
        if len(gang.members) >= gang.size:
            self._submit(gang)
        return True

    def _submit(self, gang: Gang) -> None:
        """All pods arrived: one kernel job (the gang's synthetic pod) enters the queue."""
        del self.forming[gang.key]
        first = next(iter(gang.members.values()))
        gang.job_id = gang.id
        self.by_job[gang.id] = gang
        ns, _, name = gang.key.partition("/")
        pod = PodFacts(gang.id, ns, name, gang.gpus, created=max(p.created for p in gang.members.values()),
                       labels=first.labels, annotations=first.annotations)
        for uid in gang.members:
            self.book.waiting.pop(uid, None)
        self.host.store.log("gang", gang.id, gang.key, self.host.now(),
                       detail=f"{len(gang.members)} pods, {gang.gpus} GPUs ({gang.source}): "
                              + " ".join(p.key for p in gang.members.values()))
        self.host.submit(pod)

    def vc_problem(self, vc: str, gang_id: str) -> str | None:
        """Why the gang's job cannot enter its VC's queue (the VC too small for it), or None; a
        gang its VC's nodes cannot hold even when empty is warned of once."""
        gang = self.by_job[gang_id]
        why, warn = vc_room(gang, self.host.state, vc)
        if warn:
            self._warn_once(gang, why)
        return why

    def _warn_once(self, gang: Gang, why: str) -> None:
        """A gang that cannot be placed is said once (counter, decision log, log line and a
        Warning event on its first pod), not on every pass or filter call."""
        if gang.warned:
            return
        gang.warned = True
        self.counters["gangs warned: no room for their pods"] += 1
        self.host.store.log("gang_unschedulable", gang.id, gang.key, self.host.now(), detail=why)
        log.warning("%s", why)
        event = (next(iter(gang.members.values())), "GangUnschedulable", why)
        if self.warn is not None:
            self.warn(*event)
        elif len(self.unsent) < OUTCOMES_KEPT:   # before the API server is connected (start-up's listing)
            self.unsent.append(event)

    def connect_warnings(self, warn: Callable[[PodFacts, str, str], None] | None) -> None:
        """From now on ``warn`` writes the Warning events; those said before it was connected go now."""
        self.warn = warn
        if warn is not None:
            for event in self.unsent:
                warn(*event)
            self.unsent.clear()

    def wrap_placement(self) -> None:
        """Every fit of a gang's job goes through :meth:`placed` (the policy's placer wrapped,
        around whatever wrapped it already); counted when the placer cannot be wrapped."""
        placer = getattr(self.host.policy, "placer", None)
        inner = getattr(placer, "place", None)
        if inner is None:
            return

        def place(view, vc, job):
            fit = inner(view, vc, job)
            return self.placed(placer, view, vc, job, fit) if is_gang_id(job.job_id) else fit
        try:
            placer.place = place
        except AttributeError:
            self.counters["gang placements not cut into pods by dlsched"] += 1

    def placed(self, placer, view, vc, job, fit: Fit) -> Fit:
        """A gang's fit as its pods (:meth:`wrap_placement`): a gang of equal
        pods was placed as them (``Job.gpus_per_pod``); one whose pods differ keeps the policy's fit
        when it cuts into them, else gets pieces of its pods' sizes (``sched/pods.place_sizes``),
        else no fit -- never a placement its nomination would refuse, again on every pass."""
        gang = self.by_job.get(job.job_id)
        if gang is None or job.gpus_per_pod or fit.status is Status.POSTPONE:
            return fit
        if fit.status is not Status.FITS and placer.single_node_only and job.gpus <= vc.max_node_gpus:
            return fit   # the policy never spans a job that fits one node (consolidate)
        pieces, why = cut_into_pods(placer, view, vc, job, fit, gang)
        if why and view is self.host.view:   # not a forward run's copy
            self.unsplit[job.job_id] = why
        return pieces

    def pod_shape(self, gang_id: str) -> int:
        """The GPUs per pod the gang's kernel job is placed by (``Job.gpus_per_pod``; 0: its pods
        differ, and it is placed as one job)."""
        return self.by_job[gang_id].gpus_per_pod

    def after_pass(self) -> None:
        """After a pass: each pending gang job whose pods find no room has a waiting reason that
        says so (``why_waiting``, GET /api/v1/queue), and its first pod one Warning event per gang
        (not one per pass or per filter call); a gang that has room again loses that reason."""
        for gang_id, gang in self.by_job.items():
            job = self.book.jobs.get(gang_id)
            if job is None or job.state is not PENDING:
                continue
            if not job.gpus_per_pod:   # pods of different sizes: what the last placement found
                why = self.unsplit.pop(gang_id, None)
                if why:
                    self.book.waiting[gang_id] = why
                    self._warn_once(gang, why)
                continue
            reason = self.book.waiting.get(gang_id, "")
            _, room = pod_room(self.host.view, job.vc_state, job.gpus_per_pod)
            if room * job.gpus_per_pod >= job.gpus:
                if reason.startswith(f"gang {gang.key} of "):
                    del self.book.waiting[gang_id]
                continue
            why = f"gang {gang.key} of " + no_room_reason(self.host.view, job.vc_state, job).removeprefix("gang of ")
            self.book.waiting[gang_id] = why
            self._warn_once(gang, why)

    def owns(self, uid: str) -> bool:
        return uid in self.by_uid

    # -- the pass: nominations -------------------------------------------------------------
    def nominate(self, decision, now: float) -> tuple[str, str] | None:
        """The policy started the gang's job: every pod nominated to its node and GPUs, written
        in one store transaction. Returns None, or (counter, why) when refused."""
        job, placement, _ = decision
        gang = self.by_job[job.job_id]
        st = self.host.state
        try:
            places = split_placement(placement, [(uid, p.gpus) for uid, p in gang.members.items()])
        except GangError as exc:
            return "gang placements that do not split into pods", f"gang {gang.key}: {exc}"
        rows = []
        for uid, (idx, mask) in places.items():
            slots = self.noms.take_slots(uid, idx, mask)
            rows.append((uid, gang.members[uid].key, st.node_ids[idx], slots))
        try:
            self.host.store.assume_gang(gang.id, rows, now, detail=f"policy={self.host.policy.name}")
        except Exception as exc:   # DoubleAssignment: the constraint fired for one of its pods
            for uid in places:
                self.noms.slots.pop(uid, None)
            return "nominations refused by the store", str(exc)
        gang.places, gang.nominated_at = places, now
        self.book.waiting.pop(gang.id, None)
        self.unsplit.pop(gang.id, None)
        per_node: dict[str, list[int]] = {}
        for _, _, node, slots in rows:
            per_node.setdefault(node, []).extend(g for g, _ in slots)
        first = next(iter(per_node))   # node/gpus as a one-node start has them; the whole placement beside
        self.host.record("start", uid=gang.id, node=first, gpus=sorted(per_node[first]), gang=gang.key,
                     placement=[{"node": n, "gpus": sorted(g)} for n, g in per_node.items()])
        if self.noms.on_nomination is not None:
            for uid, _pod_key, node, slots in rows:
                self.noms.on_nomination(gang.members[uid], node, gpu_text(slots))
        if self.noms.nudge is not None:
            for uid, _pod_key, node, slots in rows:
                # a pod unknown to this process is nudged by due_nudges once the service answers
                # calls (a nudge now would reach a server not yet listening)
                if uid in gang.told_wait and uid != self.noms.answering and (self.noms.serving or uid not in self.unknown):
                    self.noms.nudge(gang.members[uid], node, gpu_text(slots), True)
        return None

    def nudge_wanted(self, uid: str, node: str) -> bool:
        """Whether a queued nudge of the gang pod ``uid`` is still worth its API write: the pod is
        still nominated on ``node`` and was not told "nominated" since (it was told to wait, or this
        process never answered it)."""
        gang = self.by_uid.get(uid)
        place = gang.places.get(uid) if gang is not None else None
        return (place is not None and self.host.state.node_ids[place[0]] == node
                and (uid in gang.told_wait or uid in self.unknown))

    def due_nudges(self, now: float, again_after: float, tries: int) -> int:
        """Nudge the nominated member pods this process never answered (seen before it served:
        a restart, a new leader), once it serves, and again after ``again_after`` seconds without
        a filter call for them, ``tries`` times in all; as the core does for pods on their own.
        Called under the core's lock. Returns the nudges sent."""
        sent = 0
        for uid, (at, times) in list(self.unknown.items()):
            gang = self.by_uid.get(uid)
            if gang is None or times >= tries:
                del self.unknown[uid]
                continue
            place = gang.places.get(uid)
            if place is None or (times and now - at < again_after):
                continue   # not nominated yet (its nomination nudges it), or nudged a moment ago
            slots = self.noms.slots.get(uid) or []
            self.noms.nudge(gang.members[uid], self.host.state.node_ids[place[0]], gpu_text(slots), True)
            self.unknown[uid] = (now, times + 1)
            sent += 1
        return sent

    def released(self, gang_id: str, why: str) -> None:
        """The gang's nomination was forgotten (or its job ended): its pods' slots and rows go."""
        gang = self.by_job.get(gang_id)
        if gang is None:
            return
        uids = list(gang.places or gang.members)
        for uid in uids:
            self.noms.slots.pop(uid, None)
        gang.places = {}
        self.host.store.release_gang(gang_id, uids, self.host.now(), detail=why)

    # -- the extender's questions -----------------------------------------------------------
    def verdict(self, uid: str, node_names: list[str]) -> tuple[str, list[str], str] | None:
        """The filter's answer for a gang's pod: (outcome, nodes that pass, why the others fail),
        or None when ``uid`` is no gang's pod."""
        gang = self.by_uid.get(uid)
        if gang is None:
            return None
        answer = self._verdict(gang, uid, node_names)
        self.unknown.pop(uid, None)   # kube-scheduler asked and this process answered: known now
        if answer[0] == "nominated":
            gang.told_wait.discard(uid)
        else:
            gang.told_wait.add(uid)
        return answer

    def _verdict(self, gang: Gang, uid: str, node_names: list[str]) -> tuple[str, list[str], str]:
        if not gang.job_id:
            return "waiting", [], gang.forming_reason()
        job = self.book.jobs.get(gang.job_id)
        head = f"gang {gang.key} ({len(gang.members)} pods, {gang.gpus} GPUs)"
        if job is None:
            return "waiting", [], f"{head}: {self.book.waiting.get(gang.job_id, 'not queued')}"
        if job.state is ASSUMED and uid in gang.places:
            node = self.host.state.node_ids[gang.places[uid][0]]
            if node in node_names:
                return "nominated", [node], f"dlsched ({self.host.policy.name}) nominated {node} for this pod of {head}"
            return "waiting", [], (f"{head}: nominated {node} for this pod, which kube-scheduler did not offer "
                                   f"(its selector, affinity or taints)")
        if job.state is RUNNING:
            return "waiting", [], f"{head} is running"
        return "waiting", [], f"{head}: {self.host.why_waiting(gang.job_id)}"

    def begin_bind(self, uid: str, node: str) -> tuple[PodFacts, list[int]]:
        """Check a gang pod's bind against its nomination: (pod, GPU indices)."""
        gang = self.by_uid[uid]
        pod = gang.members[uid]
        job = self.book.jobs.get(gang.job_id)
        if job is None or job.state is not ASSUMED or uid not in gang.places:
            raise BindError(f"pod {pod.key} of gang {gang.key} is not nominated")
        nominated = self.host.state.node_ids[gang.places[uid][0]]
        if nominated != node:
            raise BindError(f"pod {pod.key} of gang {gang.key} is nominated for {nominated}, not {node}")
        return pod, [g for g, _ in self.noms.slots[uid]]

    def bind(self, service, namespace: str, name: str, uid: str, node: str) -> str:
        """The bind verb of a gang's pod: the permit stage (:meth:`Permit.bind`)."""
        return self.permit.bind(service, namespace, name, uid, node)

    def confirm(self, gang: Gang, kind: str) -> None:
        """Every pod of the gang is bound: its job runs."""
        job = self.book.jobs.get(gang.job_id)
        if job is None or job.state is not ASSUMED:
            return
        now = self.host.now()
        self.host.handle(BindSucceeded(job), now)   # the kernel's entry point: the job runs
        rows = [(uid, gang.members[uid].key, self.host.state.node_ids[idx], gpu_text(self.noms.slots[uid]))
                for uid, (idx, _) in gang.places.items()]
        self.host.store.bound_gang(gang.id, rows, now, kind=kind)
        self.host.record("confirm", uid=gang.id)

    # -- pod events -----------------------------------------------------------------------
    def bound_seen(self, pod: PodFacts) -> bool:
        """The API server shows a gang's pod bound. True when the gang accounts for it (its
        nomination, or its running job); False when it was bound elsewhere by someone else (it
        leaves the gang and the core adopts it as a pod on its own)."""
        gang = self.by_uid.get(pod.uid)
        if gang is None:
            return False
        gang.members[pod.uid] = pod
        job = self.book.jobs.get(gang.job_id) if gang.job_id else None
        if job is not None and job.state is RUNNING:
            return True
        if job is not None and job.state is ASSUMED and pod.uid in gang.places \
                and self.host.state.node_ids[gang.places[pod.uid][0]] == pod.node_name:
            return True   # its bind is under way; the binder confirms the gang
        self.member_gone(pod.uid, f"pod {pod.key} was bound to {pod.node_name} outside its gang's nomination")
        self.counters["gang pods bound by someone else"] += 1
        return False

    def member_gone(self, uid: str, why: str) -> None:
        """A gang's pod ended or left the gang: a running gang ends with its last pod; one not
        running yet is incomplete again (its job withdrawn, the rest form the gang anew)."""
        gang = self.by_uid.pop(uid, None)
        if gang is None:
            return
        gang.members.pop(uid, None)
        gang.told_wait.discard(uid)
        self.book.waiting.pop(uid, None)
        job = self.book.jobs.get(gang.job_id) if gang.job_id else None
        if job is not None and job.state is RUNNING:
            self.host.store.release_pods([uid], "finish", self.host.now(), detail=why)
            self.noms.slots.pop(uid, None)
            if not gang.members:
                self.host.end(job, self.book.pods[gang.job_id], "every pod of the gang ended")
                self.by_job.pop(gang.job_id, None)
            return
        if gang.job_id:
            if job is not None:
                self.host.end(job, self.book.pods[gang.job_id], why)   # forgets a nomination, withdraws the job
            self.book.parked.pop(gang.job_id, None)
            self.book.waiting.pop(gang.job_id, None)
            self.by_job.pop(gang.job_id, None)
            for other in gang.places:
                self.noms.slots.pop(other, None)
            gang.job_id, gang.places = "", {}
            self._reform(gang)
        elif not gang.members:
            if self.forming.get(gang.key) is gang:
                del self.forming[gang.key]
        else:
            for other in gang.members:
                self.book.waiting[other] = gang.forming_reason()

    def _reform(self, gang: Gang) -> None:
        """An incomplete gang's pods wait again (merged into the instance forming meanwhile)."""
        if not gang.members:
            return
        into = self.forming.get(gang.key)
        if into is None:
            self.seq[gang.key] += 1
            into = self.forming[gang.key] = Gang(gang.key, gang.size, gang.source, self.seq[gang.key],
                                                 first_at=gang.first_at)
        for uid, pod in gang.members.items():
            into.members[uid] = pod
            self.by_uid[uid] = into
            self.book.waiting[uid] = into.forming_reason()
        into.last_at = max(into.last_at, gang.last_at)
        if len(into.members) >= into.size:   # replacements had arrived meanwhile: whole again
            self._submit(into)

    # -- time-outs --------------------------------------------------------------------------
    def expire(self) -> int:
        """Reports gangs whose pods have not all arrived within ``arrival_timeout`` (once each:
        counter, decision log, warning, and the pods' waiting reason says so); forgets the
        nominations of gangs whose pods have not all reached bind within that time (the GPUs
        return to the queue). Returns how many gangs were reported."""
        now = self.host.now()
        late = [g for g in self.forming.values() if not g.late and now - g.first_at >= self.arrival_timeout]
        for gang in late:
            gang.late = True
            why = f"{len(gang.members)} of {gang.size} pods after {self.arrival_timeout:g} s"
            self.counters["gangs incomplete after the arrival timeout"] += 1
            self.host.store.log("gang_late", gang.id, gang.key, now, detail=why)
            log.warning("gang %s is incomplete: %s", gang.key, why)
            for uid in gang.members:
                self.book.waiting[uid] = gang.forming_reason()
        for gang in list(self.by_job.values()):
            job = self.book.jobs.get(gang.job_id)
            if job is not None and job.state is ASSUMED and now - gang.nominated_at >= self.arrival_timeout \
                    and not self.permit.binding(gang.id):
                self.counters["gang nominations expired before bind"] += 1
                self.host.forget(job, f"gang {gang.key}: no pod reached bind within {self.arrival_timeout:g} s")
        return len(late)

    # -- the operator's view ------------------------------------------------------------------
    def rows(self) -> list[dict]:
        """Every gang as one row with its pods (the dashboard's and /api/v1/state's gangs)."""
        out = []
        for gang in [*self.by_job.values(), *self.forming.values()]:
            job = self.book.jobs.get(gang.job_id) if gang.job_id else None
            state = "forming" if not gang.job_id else job.state.name.lower() if job is not None else "parked"
            pods = []
            for uid, pod in gang.members.items():
                place = gang.places.get(uid)
                pods.append({"pod": pod.key, "uid": uid, "gpus": pod.gpus,
                             "node": self.host.state.node_ids[place[0]] if place else "",
                             "gpu_indices": [g for g, _ in self.noms.slots.get(uid, ())]})
            out.append({"gang": gang.key, "id": gang.id, "size": gang.size, "source": gang.source, "state": state,
                        "gpus": gang.gpus, "pods": pods, "late": gang.late})
        return out


__all__ = ["GANG_PREFIX", "BindError", "Gang", "GangError", "GangTable", "Membership", "delete_pod", "is_gang_id",
           "kube_warner", "membership", "split_placement", "OUTCOMES_KEPT"]
