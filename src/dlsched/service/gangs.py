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

Crash safety: the nomination records every pod's node and GPUs (``gang_members`` in the store).
At start-up (:func:`dlsched.service.gang_recovery.recover`), a gang with some pods bound and some not is *completed*: the rest
are bound to their recorded nodes and GPUs; when that is not possible (a pod gone, its GPUs
taken, a bind refused), the bound ones are deleted (*released*). A gang with no pod bound is
simply decided again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dlsched.core.job import JobState
from dlsched.kernel.decisions import Fit, Status
from dlsched.kernel.stimuli import BindSucceeded
from dlsched.sched.pods import no_room_reason, place_sizes, pod_room
from dlsched.service.pods import PodFacts

if TYPE_CHECKING:   # the core imports this module; only its type is needed here
    from dlsched.service.core import SchedulerCore

log = logging.getLogger("dlsched.service")

GROUP_KEYS = ("scheduling.k8s.io/group-name", "pod-group.scheduling.sigs.k8s.io/name",
              "pod-group.scheduling.sigs.k8s.io", "scheduling.x-k8s.io/pod-group")
JOB_LABEL = "dlsched.io/job"
MIN_MEMBER_KEYS = ("dlsched.io/min-member", "pod-group.scheduling.sigs.k8s.io/min-available")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
INDEX_KEYS = ("batch.kubernetes.io/job-completion-index",)
GANG_PREFIX = "gang:"
MAX_MEMBERS = 1024
OUTCOMES_KEPT = 1000

ASSUMED, RUNNING, PENDING = JobState.ASSUMED, JobState.RUNNING, JobState.PENDING


class GangError(ValueError):
    """A pod's gang labels cannot be read, or a placement cannot be split into its pods."""


@dataclass(frozen=True, slots=True)
class Membership:
    """Which gang a pod belongs to: ``namespace/name``, its size (pods), and by which convention."""

    key: str
    size: int
    source: str


def _value(pod: PodFacts, keys: tuple[str, ...]) -> str:
    for key in keys:
        for where in (pod.labels, pod.annotations):
            value = where.get(key)
            if isinstance(value, str) and value.strip():
                return value.strip()
    return ""


def membership(pod: PodFacts) -> Membership | None:
    """The gang of ``pod``, or None when it is a pod on its own. Raises :class:`GangError` with
    the label at fault when a gang is named but its size is missing or malformed."""
    group, source = _value(pod, GROUP_KEYS), "group-name"
    if not group:
        group, source = _value(pod, (JOB_LABEL,)), JOB_LABEL
    named = source == "group-name" and bool(group)   # a coscheduling group must say its size
    if not group and _value(pod, (JOBSET_LABEL,)):
        group, source = _value(pod, (JOBSET_LABEL,)), "jobset"
    if not group and pod.owner.startswith("Job/") and _value(pod, INDEX_KEYS):
        group, source = pod.owner.split("/")[1], "indexed job"
    if not group:
        return None
    text = _value(pod, MIN_MEMBER_KEYS)
    if not text:
        if named:
            raise GangError(f"pod {pod.key} names gang {group!r} but has no {MIN_MEMBER_KEYS[0]} (its size)")
        return None   # an owner without a size: its pods are scheduled one by one
    if not text.isdigit() or not 1 <= int(text) <= MAX_MEMBERS:
        raise GangError(f"pod {pod.key}: {MIN_MEMBER_KEYS[0]}={text!r} is not a whole number in 1..{MAX_MEMBERS}")
    return Membership(f"{pod.namespace}/{group}", int(text), source)


def split_placement(placement, pods: list[tuple[str, int]]) -> dict[str, tuple[int, int]]:
    """A kernel placement ``((node, GPU mask), ...)`` of a gang -> each pod's (node, GPU mask).
    Pods (largest request first, then in the given order) fill the nodes in placement order,
    lowest GPU indices first; each pod must fit inside one node's share. Raises
    :class:`GangError` when the shares cannot be cut into the pods' requests."""
    shares = [[node, [g for g in range(mask.bit_length()) if mask >> g & 1]] for node, mask in placement]
    if sum(len(s[1]) for s in shares) != sum(n for _, n in pods):
        raise GangError(f"the placement holds {sum(len(s[1]) for s in shares)} GPUs, the pods request "
                        f"{sum(n for _, n in pods)}")
    out: dict[str, tuple[int, int]] = {}
    for uid, need in sorted(pods, key=lambda p: -p[1]):
        share = next((s for s in shares if len(s[1]) >= need), None)
        if share is None:
            raise GangError(f"a pod of {need} GPUs fits in no node's share of the placement "
                            f"({', '.join(str(len(s[1])) for s in shares)} GPUs left per node)")
        taken, share[1] = share[1][:need], share[1][need:]
        out[uid] = (share[0], sum(1 << g for g in taken))
    return out


@dataclass(eq=False)
class Gang:
    """One instance of a gang: its pods, and once all arrived its kernel job and nomination."""

    key: str
    size: int
    source: str
    seq: int
    members: dict[str, PodFacts] = field(default_factory=dict)   # uid -> pod, in arrival order
    first_at: float = 0.0
    last_at: float = 0.0
    job_id: str = ""                                           # the kernel job, once all arrived
    places: dict[str, tuple[int, int]] = field(default_factory=dict)   # uid -> (node, mask) nominated
    nominated_at: float = 0.0
    told_wait: set[str] = field(default_factory=set)           # pods kube-scheduler was told to wait
    late: bool = False                                         # reported: not all pods arrived in time
    warned: bool = False                                       # its Warning event (no room for its pods) sent

    @property
    def id(self) -> str:
        return f"{GANG_PREFIX}{self.key}#{self.seq}"

    @property
    def gpus(self) -> int:
        return sum(p.gpus for p in self.members.values())

    @property
    def gpus_per_pod(self) -> int:
        """The pods' GPU request when every pod that asks for GPUs asks for the same (0-GPU pods,
        e.g. a launcher, need no piece); 0 when they differ (the gang is placed as one job)."""
        sizes = {p.gpus for p in self.members.values() if p.gpus > 0}
        return sizes.pop() if len(sizes) == 1 else 0

    def forming_reason(self) -> str:
        late = " (reported late)" if self.late else ""
        return (f"gang {self.key}: {len(self.members)} of {self.size} pods arrived{late}; dlsched places "
                f"a gang once all its pods are pending")


def is_gang_id(uid: str) -> bool:
    return uid.startswith(GANG_PREFIX)


class GangTable:
    """The service's gangs: membership, the kernel jobs of complete gangs, nominations split into
    pods, arrival time-outs and the permit barrier of their binds. Called by the core under its
    lock (the hooks marked ``gang hook`` in ``service/core.py``), except :meth:`bind`, which
    takes the lock itself and waits outside it."""

    def __init__(self, arrival_timeout: float = 120.0, permit_timeout: float = 8.0) -> None:
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
        self._cond = threading.Condition()
        self._arrived: dict[tuple, dict[str, float]] = {}
        self._outcomes: OrderedDict[tuple, dict[str, str] | None] = OrderedDict()

    # -- membership ---------------------------------------------------------------------
    def admit(self, core: SchedulerCore, pod: PodFacts) -> bool:
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
            core.parked[pod.uid] = pod
            core.waiting[pod.uid] = str(exc)
            self.counters["gang pods with bad labels"] += 1
            return True
        if m is None:
            return False
        now = core.now()
        gang = self.forming.get(m.key)
        if gang is None:
            self.seq[m.key] += 1
            gang = self.forming[m.key] = Gang(m.key, m.size, m.source, self.seq[m.key], first_at=now)
        elif gang.size != m.size:
            self.counters["gang pods disagreeing on the size"] += 1
        core.parked.pop(pod.uid, None)
        gang.members[pod.uid] = pod
        if not core.serving:
            self.unknown.setdefault(pod.uid, (0.0, 0))
        gang.last_at = now
        self.by_uid[pod.uid] = gang
        core.waiting[pod.uid] = gang.forming_reason()
        if len(gang.members) >= gang.size:
            self._submit(core, gang)
        return True

    def _submit(self, core: SchedulerCore, gang: Gang) -> None:
        """All pods arrived: one kernel job (the gang's synthetic pod) enters the queue."""
        del self.forming[gang.key]
        first = next(iter(gang.members.values()))
        gang.job_id = gang.id
        self.by_job[gang.id] = gang
        ns, _, name = gang.key.partition("/")
        pod = PodFacts(gang.id, ns, name, gang.gpus, created=max(p.created for p in gang.members.values()),
                       labels=first.labels, annotations=first.annotations)
        for uid in gang.members:
            core.waiting.pop(uid, None)
        core.store.log("gang", gang.id, gang.key, core.now(),
                       detail=f"{len(gang.members)} pods, {gang.gpus} GPUs ({gang.source}): "
                              + " ".join(p.key for p in gang.members.values()))
        core._submit(pod)

    def vc_problem(self, core: SchedulerCore, vc: str, gang_id: str) -> str | None:
        """Why the gang's job cannot enter its VC's queue (the VC too small for it), or None."""
        gang = self.by_job[gang_id]
        st = core.state
        vid = st.vc_index.get(vc)
        if vid is None or not st.vcs[vid].total_gpus:
            return f"VC {vc} has no GPU nodes"
        nodes = [n for n in st.vcs[vid].nodes if not st.node_removed[n]]
        biggest = max((st.node_gpus[n] for n in nodes), default=0)
        widest = max(p.gpus for p in gang.members.values())
        if widest > biggest:
            return f"a pod of gang {gang.key} needs {widest} GPUs on one node; the largest node of VC {vc} has {biggest}"
        total = sum(st.node_gpus[n] for n in nodes)
        if gang.gpus > total:
            return f"gang {gang.key} needs {gang.gpus} GPUs; VC {vc} has {total}"
        per = gang.gpus_per_pod
        room = sum(st.node_gpus[n] // per for n in nodes) if per else 0
        if per and room * per < gang.gpus:
            why = (f"gang {gang.key} of {gang.gpus // per} x {per} GPUs needs {gang.gpus // per} pods of {per} GPUs "
                   f"on one node each; the nodes of VC {vc} hold {room} such pods even when empty")
            self._warn_once(core, gang, why)
            return why
        return None

    def _warn_once(self, core: SchedulerCore, gang: Gang, why: str) -> None:
        """A gang that cannot be placed is said once (counter, decision log, log line and a
        Warning event on its first pod), not on every pass or filter call."""
        if gang.warned:
            return
        gang.warned = True
        self.counters["gangs warned: no room for their pods"] += 1
        core.store.log("gang_unschedulable", gang.id, gang.key, core.now(), detail=why)
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

    def wrap_placement(self, core: SchedulerCore) -> None:
        """Every fit of a gang's job goes through :meth:`placed` (the policy's placer wrapped,
        around whatever wrapped it already); counted when the placer cannot be wrapped."""
        placer = getattr(core.policy, "placer", None)
        inner = getattr(placer, "place", None)
        if inner is None:
            return

        def place(view, vc, job):
            fit = inner(view, vc, job)
            return self.placed(core, placer, view, vc, job, fit) if is_gang_id(job.job_id) else fit
        try:
            placer.place = place
        except AttributeError:
            self.counters["gang placements not cut into pods by dlsched"] += 1

    def placed(self, core: SchedulerCore, placer, view, vc, job, fit: Fit) -> Fit:
        """A gang's fit as its pods (:meth:`wrap_placement`): a gang of equal
        pods was placed as them (``Job.gpus_per_pod``); one whose pods differ keeps the policy's fit
        when it cuts into them, else gets pieces of its pods' sizes (``sched/pods.place_sizes``),
        else no fit -- never a placement its nomination would refuse, again on every pass."""
        gang = self.by_job.get(job.job_id)
        if gang is None or job.gpus_per_pod or fit.status is Status.POSTPONE:
            return fit
        if fit.status is not Status.FITS and placer.single_node_only and job.gpus <= vc.max_node_gpus:
            return fit   # the policy never spans a job that fits one node (consolidate)
        pods = [(uid, p.gpus) for uid, p in gang.members.items()]
        try:
            if fit.placement is not None:
                split_placement(fit.placement, pods)
                return fit
        except GangError:
            pass
        pieces = place_sizes(placer, view, vc, job, [g for _, g in pods])
        if pieces.status is Status.FITS:
            for plugin in placer.permits:
                pieces = plugin.permit(view, vc, job, pieces)
                if pieces.status is not Status.FITS:
                    break
        if pieces.status is Status.UNSCHEDULABLE and view is core.view:   # not a forward run's copy
            self.unsplit[job.job_id] = f"gang {gang.key} of pods of {'+'.join(str(g) for _, g in pods)} GPUs: " \
                                       + pieces.reason
        return pieces

    def pod_shape(self, gang_id: str) -> int:
        """The GPUs per pod the gang's kernel job is placed by (``Job.gpus_per_pod``; 0: its pods
        differ, and it is placed as one job)."""
        return self.by_job[gang_id].gpus_per_pod

    def after_pass(self, core: SchedulerCore) -> None:
        """After a pass: each pending gang job whose pods find no room has a waiting reason that
        says so (``why_waiting``, GET /api/v1/queue), and its first pod one Warning event per gang
        (not one per pass or per filter call); a gang that has room again loses that reason."""
        for gang_id, gang in self.by_job.items():
            job = core.jobs.get(gang_id)
            if job is None or job.state is not PENDING:
                continue
            if not job.gpus_per_pod:   # pods of different sizes: what the last placement found
                why = self.unsplit.pop(gang_id, None)
                if why:
                    core.waiting[gang_id] = why
                    self._warn_once(core, gang, why)
                continue
            reason = core.waiting.get(gang_id, "")
            _, room = pod_room(core.view, job.vc_state, job.gpus_per_pod)
            if room * job.gpus_per_pod >= job.gpus:
                if reason.startswith(f"gang {gang.key} of "):
                    del core.waiting[gang_id]
                continue
            why = f"gang {gang.key} of " + no_room_reason(core.view, job.vc_state, job).removeprefix("gang of ")
            core.waiting[gang_id] = why
            self._warn_once(core, gang, why)

    def owns(self, uid: str) -> bool:
        return uid in self.by_uid

    # -- the pass: nominations -------------------------------------------------------------
    def nominate(self, core: SchedulerCore, decision, now: float) -> tuple[str, str] | None:
        """The policy started the gang's job: every pod nominated to its node and GPUs, written
        in one store transaction. Returns None, or (counter, why) when refused."""
        job, placement, _ = decision
        gang = self.by_job[job.job_id]
        st = core.state
        try:
            places = split_placement(placement, [(uid, p.gpus) for uid, p in gang.members.items()])
        except GangError as exc:
            return "gang placements that do not split into pods", f"gang {gang.key}: {exc}"
        rows = []
        for uid, (idx, mask) in places.items():
            slots = core._take_slots(uid, idx, mask)
            rows.append((uid, gang.members[uid].key, st.node_ids[idx], slots))
        try:
            core.store.assume_gang(gang.id, rows, now, detail=f"policy={core.policy.name}")
        except Exception as exc:   # DoubleAssignment: the constraint fired for one of its pods
            for uid in places:
                core.slots.pop(uid, None)
            return "nominations refused by the store", str(exc)
        gang.places, gang.nominated_at = places, now
        core.waiting.pop(gang.id, None)
        self.unsplit.pop(gang.id, None)
        per_node: dict[str, list[int]] = {}
        for _, _, node, slots in rows:
            per_node.setdefault(node, []).extend(g for g, _ in slots)
        first = next(iter(per_node))   # node/gpus as a one-node start has them; the whole placement beside
        core._record("start", uid=gang.id, node=first, gpus=sorted(per_node[first]), gang=gang.key,
                     placement=[{"node": n, "gpus": sorted(g)} for n, g in per_node.items()])
        if core.on_nomination is not None:   # the scheduler mode's binder: each pod's Binding
            for uid, _pod_key, node, slots in rows:
                core.on_nomination(gang.members[uid], node, ",".join(str(g) for g, _ in slots))
        if core.nudge is not None:
            for uid, _pod_key, node, slots in rows:
                # a pod unknown to this process is nudged by due_nudges once the service answers
                # calls (a nudge now would reach a server not yet listening)
                if uid in gang.told_wait and uid != core._answering and (core.serving or uid not in self.unknown):
                    core.nudge(gang.members[uid], node, ",".join(str(g) for g, _ in slots), True)
        return None

    def nudge_wanted(self, core: SchedulerCore, uid: str, node: str) -> bool:
        """Whether a queued nudge of the gang pod ``uid`` is still worth its API write: the pod is
        still nominated on ``node`` and was not told "nominated" since (it was told to wait, or this
        process never answered it)."""
        gang = self.by_uid.get(uid)
        place = gang.places.get(uid) if gang is not None else None
        return (place is not None and core.state.node_ids[place[0]] == node
                and (uid in gang.told_wait or uid in self.unknown))

    def due_nudges(self, core: SchedulerCore, now: float, again_after: float, tries: int) -> int:
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
            slots = core.slots.get(uid) or []
            core.nudge(gang.members[uid], core.state.node_ids[place[0]], ",".join(str(g) for g, _ in slots), True)
            self.unknown[uid] = (now, times + 1)
            sent += 1
        return sent

    def released(self, core: SchedulerCore, gang_id: str, why: str) -> None:
        """The gang's nomination was forgotten (or its job ended): its pods' slots and rows go."""
        gang = self.by_job.get(gang_id)
        if gang is None:
            return
        uids = list(gang.places or gang.members)
        for uid in uids:
            core.slots.pop(uid, None)
        gang.places = {}
        core.store.release_gang(gang_id, uids, core.now(), detail=why)

    # -- the extender's questions -----------------------------------------------------------
    def verdict(self, core: SchedulerCore, uid: str, node_names: list[str]) -> tuple[str, list[str], str] | None:
        """The filter's answer for a gang's pod: (outcome, nodes that pass, why the others fail),
        or None when ``uid`` is no gang's pod."""
        gang = self.by_uid.get(uid)
        if gang is None:
            return None
        answer = self._verdict(core, gang, uid, node_names)
        self.unknown.pop(uid, None)   # kube-scheduler asked and this process answered: known now
        if answer[0] == "nominated":
            gang.told_wait.discard(uid)
        else:
            gang.told_wait.add(uid)
        return answer

    def _verdict(self, core: SchedulerCore, gang: Gang, uid: str, node_names: list[str]) -> tuple[str, list[str], str]:
        if not gang.job_id:
            return "waiting", [], gang.forming_reason()
        job = core.jobs.get(gang.job_id)
        head = f"gang {gang.key} ({len(gang.members)} pods, {gang.gpus} GPUs)"
        if job is None:
            return "waiting", [], f"{head}: {core.waiting.get(gang.job_id, 'not queued')}"
        if job.state is ASSUMED and uid in gang.places:
            node = core.state.node_ids[gang.places[uid][0]]
            if node in node_names:
                return "nominated", [node], f"dlsched ({core.policy.name}) nominated {node} for this pod of {head}"
            return "waiting", [], (f"{head}: nominated {node} for this pod, which kube-scheduler did not offer "
                                   f"(its selector, affinity or taints)")
        if job.state is RUNNING:
            return "waiting", [], f"{head} is running"
        return "waiting", [], f"{head}: {core.why_waiting(gang.job_id)}"

    def begin_bind(self, core: SchedulerCore, uid: str, node: str) -> tuple[PodFacts, list[int]]:
        """Check a gang pod's bind against its nomination: (pod, GPU indices)."""
        from dlsched.service.core import BindError

        gang = self.by_uid[uid]
        pod = gang.members[uid]
        job = core.jobs.get(gang.job_id)
        if job is None or job.state is not ASSUMED or uid not in gang.places:
            raise BindError(f"pod {pod.key} of gang {gang.key} is not nominated")
        nominated = core.state.node_ids[gang.places[uid][0]]
        if nominated != node:
            raise BindError(f"pod {pod.key} of gang {gang.key} is nominated for {nominated}, not {node}")
        return pod, [g for g, _ in core.slots[uid]]

    # -- the permit stage -----------------------------------------------------------------
    def bind(self, service, namespace: str, name: str, uid: str, node: str) -> str:
        """The bind verb of a gang's pod: waits (at most ``permit_timeout``) until every pod of
        the gang has reached bind; the last to arrive binds them all, deletes the bound ones if
        any bind fails, and every waiting call returns its own pod's outcome."""
        from dlsched.service.core import BindError

        core = service.core
        with core.lock:
            try:
                pod, _ = self.begin_bind(core, uid, node)
            except BindError as exc:
                return str(exc)
            if (pod.namespace, pod.name) != (namespace, name):
                return f"uid {uid} is pod {pod.key}, not {namespace}/{name}"
            gang = self.by_uid[uid]
            ticket = (gang.id, gang.nominated_at)
            size = len(gang.places)
        deadline = time.monotonic() + self.permit_timeout
        with self._cond:
            decided = self._outcomes.get(ticket)
            if decided is not None:   # released or bound already: this call comes too late
                return decided.get(uid, decided.get("*", ""))
            arrived = self._arrived.setdefault(ticket, {})
            arrived[uid] = time.time()
            lead = len(arrived) == size and ticket not in self._outcomes
            if lead:
                self._outcomes[ticket] = None   # in progress
            else:
                while self._outcomes.get(ticket, None) is None:
                    left = deadline - time.monotonic()
                    if left <= 0 or not self._cond.wait(left):
                        break
                outcome = self._outcomes.get(ticket)
                if outcome is not None:
                    return outcome.get(uid, outcome.get("*", ""))
                if ticket in self._outcomes:   # the leader is binding: wait for it without a limit
                    while self._outcomes.get(ticket) is None:
                        self._cond.wait(1.0)
                    outcome = self._outcomes[ticket]
                    return outcome.get(uid, outcome.get("*", ""))
                self._outcomes[ticket] = None   # timed out first: this call releases the gang
        if lead:
            outcome = self._bind_all(service, gang, ticket, arrived)
        else:
            why = (f"gang {gang.key}: {len(arrived)} of {size} pods reached bind within "
                   f"{self.permit_timeout:g} s; the gang's nomination is released")
            self.counters["gang permits timed out"] += 1
            with core.lock:
                job = core.jobs.get(gang.job_id)
                if job is not None and job.state is ASSUMED and gang.nominated_at == ticket[1]:
                    core._forget(job, why)
            outcome = {"*": why}
        with self._cond:
            self._outcomes[ticket] = outcome
            self._arrived.pop(ticket, None)
            while len(self._outcomes) > OUTCOMES_KEPT:
                self._outcomes.popitem(last=False)
            self._cond.notify_all()
        return outcome.get(uid, outcome.get("*", ""))

    def _bind_all(self, service, gang: Gang, ticket: tuple, arrived: dict[str, float]) -> dict[str, str]:
        """Bind every pod of the gang (the permit passed); all-or-nothing."""
        core, bridge = service.core, service.bridge
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
                self.confirm(core, gang, "bind")
            self.counters["gangs bound"] += 1
            service.stats["binds"] += len(done)
            self.last_bind[gang.key] = {"pods": len(done), "last_arrival": max(p.created for p in gang.members.values()),
                                        "first_bind_call": min(arrived.values()), "bound": bound_at}
            return {p.uid: "" for p in done}
        (failed_uid, error), = errors.items()
        failed = next(p for p, *_ in todo if p.uid == failed_uid)
        why = f"gang {gang.key}: the bind of pod {failed.key} failed ({error}); all its pods are released"
        deleted = [p for p in done if not delete_pod(bridge, p)]
        self.counters["gang binds failed"] += 1
        service.stats["bind_failures"] += 1
        with core.lock:
            job = core.jobs.get(gang.job_id)
            if job is not None and job.state is ASSUMED:
                core._forget(job, why)
            for p in done:   # deleted: their controller makes new pods, which form the gang again
                self.member_gone(core, p.uid, why)
        if deleted:
            log.warning("%s; could not delete %s", why, ", ".join(p.key for p in deleted))
        return {"*": why}

    def confirm(self, core: SchedulerCore, gang: Gang, kind: str) -> None:
        """Every pod of the gang is bound: its job runs."""
        job = core.jobs.get(gang.job_id)
        if job is None or job.state is not ASSUMED:
            return
        now = core.now()
        core._handle(BindSucceeded(job), now)   # the kernel's entry point: the job runs
        rows = [(uid, gang.members[uid].key, core.state.node_ids[idx], ",".join(str(g) for g, _ in core.slots[uid]))
                for uid, (idx, _) in gang.places.items()]
        core.store.bound_gang(gang.id, rows, now, kind=kind)
        core._record("confirm", uid=gang.id)

    # -- pod events -----------------------------------------------------------------------
    def bound_seen(self, core: SchedulerCore, pod: PodFacts) -> bool:
        """The API server shows a gang's pod bound. True when the gang accounts for it (its
        nomination, or its running job); False when it was bound elsewhere by someone else (it
        leaves the gang and the core adopts it as a pod on its own)."""
        gang = self.by_uid.get(pod.uid)
        if gang is None:
            return False
        gang.members[pod.uid] = pod
        job = core.jobs.get(gang.job_id) if gang.job_id else None
        if job is not None and job.state is RUNNING:
            return True
        if job is not None and job.state is ASSUMED and pod.uid in gang.places \
                and core.state.node_ids[gang.places[pod.uid][0]] == pod.node_name:
            return True   # its bind is under way; the binder confirms the gang
        self.member_gone(core, pod.uid, f"pod {pod.key} was bound to {pod.node_name} outside its gang's nomination")
        self.counters["gang pods bound by someone else"] += 1
        return False

    def member_gone(self, core: SchedulerCore, uid: str, why: str) -> None:
        """A gang's pod ended or left the gang: a running gang ends with its last pod; one not
        running yet is incomplete again (its job withdrawn, the rest form the gang anew)."""
        gang = self.by_uid.pop(uid, None)
        if gang is None:
            return
        gang.members.pop(uid, None)
        gang.told_wait.discard(uid)
        core.waiting.pop(uid, None)
        job = core.jobs.get(gang.job_id) if gang.job_id else None
        if job is not None and job.state is RUNNING:
            core.store.release_pods([uid], "finish", core.now(), detail=why)
            core.slots.pop(uid, None)
            if not gang.members:
                core._end(job, core.pods[gang.job_id], "every pod of the gang ended")
                self.by_job.pop(gang.job_id, None)
            return
        if gang.job_id:
            if job is not None:
                core._end(job, core.pods[gang.job_id], why)   # forgets a nomination, withdraws the job
            core.parked.pop(gang.job_id, None)
            core.waiting.pop(gang.job_id, None)
            self.by_job.pop(gang.job_id, None)
            for other in gang.places:
                core.slots.pop(other, None)
            gang.job_id, gang.places = "", {}
            self._reform(core, gang)
        elif not gang.members:
            if self.forming.get(gang.key) is gang:
                del self.forming[gang.key]
        else:
            for other in gang.members:
                core.waiting[other] = gang.forming_reason()

    def _reform(self, core: SchedulerCore, gang: Gang) -> None:
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
            core.waiting[uid] = into.forming_reason()
        into.last_at = max(into.last_at, gang.last_at)
        if len(into.members) >= into.size:   # replacements had arrived meanwhile: whole again
            self._submit(core, into)

    # -- time-outs --------------------------------------------------------------------------
    def expire(self, core: SchedulerCore) -> int:
        """Reports gangs whose pods have not all arrived within ``arrival_timeout`` (once each:
        counter, decision log, warning, and the pods' waiting reason says so); forgets the
        nominations of gangs whose pods have not all reached bind within that time (the GPUs
        return to the queue). Returns how many gangs were reported."""
        now = core.now()
        late = [g for g in self.forming.values() if not g.late and now - g.first_at >= self.arrival_timeout]
        for gang in late:
            gang.late = True
            why = f"{len(gang.members)} of {gang.size} pods after {self.arrival_timeout:g} s"
            self.counters["gangs incomplete after the arrival timeout"] += 1
            core.store.log("gang_late", gang.id, gang.key, now, detail=why)
            log.warning("gang %s is incomplete: %s", gang.key, why)
            for uid in gang.members:
                core.waiting[uid] = gang.forming_reason()
        for gang in list(self.by_job.values()):
            job = core.jobs.get(gang.job_id)
            if job is not None and job.state is ASSUMED and now - gang.nominated_at >= self.arrival_timeout:
                with self._cond:
                    binding = any(t[0] == gang.id for t in self._arrived) or \
                        any(t[0] == gang.id and o is None for t, o in self._outcomes.items())
                if not binding:
                    self.counters["gang nominations expired before bind"] += 1
                    core._forget(job, f"gang {gang.key}: no pod reached bind within {self.arrival_timeout:g} s")
        return len(late)

    # -- the operator's view ------------------------------------------------------------------
    def rows(self, core: SchedulerCore) -> list[dict]:
        """Every gang as one row with its pods (the dashboard's and /api/v1/state's gangs)."""
        out = []
        for gang in [*self.by_job.values(), *self.forming.values()]:
            job = core.jobs.get(gang.job_id) if gang.job_id else None
            state = "forming" if not gang.job_id else job.state.name.lower() if job is not None else "parked"
            pods = []
            for uid, pod in gang.members.items():
                place = gang.places.get(uid)
                pods.append({"pod": pod.key, "uid": uid, "gpus": pod.gpus,
                             "node": core.state.node_ids[place[0]] if place else "",
                             "gpu_indices": [g for g, _ in core.slots.get(uid, ())]})
            out.append({"gang": gang.key, "id": gang.id, "size": gang.size, "source": gang.source, "state": state,
                        "gpus": gang.gpus, "pods": pods, "late": gang.late})
        return out


def kube_warner(service) -> Callable[[PodFacts, str, str], None] | None:
    """``warn(pod, reason, message)``: a Warning Event on ``pod`` through the service's API server,
    written by a thread of its own (the caller holds the core's lock) and only while this
    replica leads; None without an API client."""
    api = getattr(service.bridge, "api", None)
    if api is None:
        return None
    core = service.core

    def write(pod: PodFacts, reason: str, message: str) -> None:
        if not core.may_nominate():   # a replica that lost its lease writes nothing
            return
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        body = {"apiVersion": "v1", "kind": "Event", "metadata": {"generateName": f"{pod.name}.",
                                                                  "namespace": pod.namespace},
                "involvedObject": {"kind": "Pod", "apiVersion": "v1", "namespace": pod.namespace,
                                   "name": pod.name, "uid": pod.uid},
                "reason": reason, "message": message[:1024], "type": "Warning", "source": {"component": "dlsched"},
                "firstTimestamp": stamp, "lastTimestamp": stamp, "count": 1}
        try:
            api.create_namespaced_event(pod.namespace, body, _preload_content=False).release_conn()
            core.gangs.counters["gang warning events"] += 1
        except Exception as exc:  # noqa: BLE001 - an event is best effort; counted and logged
            core.gangs.counters["gang warning events failed"] += 1
            log.warning("gang warning event on %s failed: %s", pod.key, exc)

    def warn(pod: PodFacts, reason: str, message: str) -> None:
        threading.Thread(target=write, args=(pod, reason, message), name="gang-warn", daemon=True).start()
    return warn


def delete_pod(bridge, pod: PodFacts) -> bool:
    """Delete a bound pod of a gang that could not be bound whole (precondition: its uid), so that
    its controller recreates it; True when deleted (or already gone)."""
    if bridge is None or not hasattr(bridge, "api"):
        return bridge is not None and bool(getattr(bridge, "delete", lambda p: False)(pod))
    from kubernetes.client import V1DeleteOptions, V1Preconditions
    from kubernetes.client.exceptions import ApiException

    try:
        resp = bridge.api.delete_namespaced_pod(pod.name, pod.namespace, body=V1DeleteOptions(
            grace_period_seconds=0, preconditions=V1Preconditions(uid=pod.uid)), _preload_content=False)
        resp.release_conn()
        return True
    except ApiException as exc:
        return exc.status in (404, 409)   # gone already, or another pod now has the name
    except Exception:  # noqa: BLE001 - the API server unreachable: reported by the caller
        return False
