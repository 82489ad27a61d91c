"""A gang's members: which gang a pod belongs to (by label, annotation or owner), how a
kernel placement of the gang is cut into its pods' node-local shares (and whether its VC can
hold it at all), and one instance of a gang while its pods arrive and once it is nominated.
Data and functions of their arguments (no service state), shared by the gang table, the live
placement rules and the replay."""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.kernel.decisions import Fit, Status
from dlsched.kernel.state import ClusterState
from dlsched.sched.pods import place_sizes
from dlsched.service.pods import PodFacts

GROUP_KEYS = ("scheduling.k8s.io/group-name", "pod-group.scheduling.sigs.k8s.io/name",
              "pod-group.scheduling.sigs.k8s.io", "scheduling.x-k8s.io/pod-group")
JOB_LABEL = "dlsched.io/job"
MIN_MEMBER_KEYS = ("dlsched.io/min-member", "pod-group.scheduling.sigs.k8s.io/min-available")
JOBSET_LABEL = "jobset.sigs.k8s.io/jobset-name"
INDEX_KEYS = ("batch.kubernetes.io/job-completion-index",)
GANG_PREFIX = "gang:"
MAX_MEMBERS = 1024


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


def vc_room(gang: Gang, st: ClusterState, vc: str) -> tuple[str | None, bool]:
    """Why the gang cannot enter the queue of VC ``vc`` (the VC too small for it), or None; and
    whether that is worth a warning (its pods of equal size fit no packing of the VC's nodes)."""
    vid = st.vc_index.get(vc)
    if vid is None or not st.vcs[vid].total_gpus:
        return f"VC {vc} has no GPU nodes", False
    nodes = [n for n in st.vcs[vid].nodes if not st.node_removed[n]]
    biggest = max((st.node_gpus[n] for n in nodes), default=0)
    widest = max(p.gpus for p in gang.members.values())
    if widest > biggest:
        return f"a pod of gang {gang.key} needs {widest} GPUs on one node; the largest node of VC {vc} has {biggest}", False
    total = sum(st.node_gpus[n] for n in nodes)
    if gang.gpus > total:
        return f"gang {gang.key} needs {gang.gpus} GPUs; VC {vc} has {total}", False
    per = gang.gpus_per_pod
    room = sum(st.node_gpus[n] // per for n in nodes) if per else 0
    if per and room * per < gang.gpus:
        return (f"gang {gang.key} of {gang.gpus // per} x {per} GPUs needs {gang.gpus // per} pods of {per} GPUs "
                f"on one node each; the nodes of VC {vc} hold {room} such pods even when empty"), True
    return None, False


def cut_into_pods(placer, view, vc, job, fit: Fit, gang: Gang) -> tuple[Fit, str]:
    """A fit of a gang whose pods differ in size, as its pods: the policy's fit when it cuts into
    them, else pieces of its pods' sizes (``sched/pods.place_sizes``) through the placer's
    permits, else no fit; and why no pieces were found ('' otherwise)."""
    pods = [(uid, p.gpus) for uid, p in gang.members.items()]
    try:
        if fit.placement is not None:
            split_placement(fit.placement, pods)
            return fit, ""
    except GangError:
        pass
    pieces = place_sizes(placer, view, vc, job, [g for _, g in pods])
    if pieces.status is Status.FITS:
        for plugin in placer.permits:
            pieces = plugin.permit(view, vc, job, pieces)
            if pieces.status is not Status.FITS:
                break
    if pieces.status is Status.UNSCHEDULABLE:
        return pieces, f"gang {gang.key} of pods of {'+'.join(str(g) for _, g in pods)} GPUs: " + pieces.reason
    return pieces, ""
