"""Nominations of pods on their own: the GPU slots a pod holds, the store's write that makes an
assumed start durable before the extender says "nominated", and the nudges that make
kube-scheduler ask again for a pod it was told to wait.

A gang's pods are nominated by their gang (:mod:`dlsched.service.gangs`) with the same slots,
listener and nudge callbacks held here.
"""

from __future__ import annotations

from collections.abc import Callable

from dlsched.core.job import JobState
from dlsched.kernel.state import ClusterState
from dlsched.kernel.stimuli import Bind
from dlsched.service.podbook import PodBook
from dlsched.service.pods import PodFacts
from dlsched.service.store import DoubleAssignment, Store

ASSUMED = JobState.ASSUMED
NUDGE_AGAIN_S = 5.0   # seconds without a filter call before a pod nudged as unknown is nudged again
NUDGE_TRIES = 2       # nudges of such a pod in all


class BindError(RuntimeError):
    """The bind asked for cannot be carried out (the reason goes back to the kube-scheduler)."""


def gpu_text(slots: list[tuple[int, int]]) -> str:
    """GPU indices as the store and the pod annotation write them ("0,1")."""
    return ",".join(str(g) for g, _ in slots)


class Nominations:
    """Slots, the store write of a nomination, its listener and the nudges of waiting pods."""

    def __init__(self, state: ClusterState, store: Store, book: PodBook, policy_name: str,
                 record: Callable[..., None]) -> None:
        self.state, self.store, self.book = state, store, book
        self.policy_name = policy_name
        self.record = record   # (kind, **fields) -> the replayable event log
        self.slots: dict[str, list[tuple[int, int]]] = {}   # pod uid -> (GPU, slot) it holds
        # told of a nomination of a pod kube-scheduler was told to wait (pod, node, GPU text, True):
        # the service annotates the pending pod, and the update makes kube-scheduler retry it
        self.nudge: Callable[[PodFacts, str, str, bool], None] | None = None
        # told of every nomination (pod, node, GPU text) once it is in the store
        self.on_nomination: Callable[[PodFacts, str, str], None] | None = None
        # False until the service answers extender calls (runtime.start): a pod seen before then may
        # have had its last call answered 503 or refused, and sit in kube-scheduler's unschedulable
        # queue until its 60-s flush; its last outcome is "unknown" and it is nudged once nominated
        self.serving = False
        self.startup_nudges: dict[str, tuple[float, int]] = {}   # uid -> (when, times) of a pod nudged as unknown
        self.answering = ""   # the uid whose filter call is being answered (its answer says "nominated")

    def take_slots(self, uid: str, idx: int, mask: int) -> list[tuple[int, int]]:
        """(GPU, slot) pairs: the slot is the lowest not used by the GPU's other holders."""
        st = self.state
        out = []
        for g in range(mask.bit_length()):
            if not mask >> g & 1:
                continue
            used = {s for other in st.gpu_holders(idx, g) if other.job_id != uid
                    for gg, s in self.slots.get(other.job_id, ()) if gg == g}
            out.append((g, min(s for s in range(st.cap + 1) if s not in used)))
        self.slots[uid] = out
        return out

    def gpus_text(self, uid: str) -> str:
        return gpu_text(self.slots.get(uid, []))

    def nominate(self, decision: Bind, now: float) -> tuple[str, str] | None:
        """Book an assumed start of a pod on its own as a nomination (store first). Returns None,
        or (counter, why) when it is refused (the caller returns the GPUs once the pass's actions
        are booked)."""
        st, book = self.state, self.book
        job, placement, shared = decision
        uid = job.job_id
        pod = book.pods[uid]
        if len(placement) != 1:   # a policy that places without its placer (the placer refuses them)
            return "multi-node placements refused", (f"the policy placed it on {len(placement)} nodes; "
                                                      f"a pod runs on one node")
        idx, mask = placement[0]
        allowed = book.offered.get(uid)
        if allowed is not None and st.node_ids[idx] not in allowed:
            # a policy that places without the restricted placement (its own shortcut): refused
            return ("nominations off the nodes kube-scheduler offered",
                    f"the policy placed it on {st.node_ids[idx]}, which kube-scheduler did not "
                    f"offer for this pod (its selector, affinity or taints)")
        slots = self.take_slots(uid, idx, mask)
        try:
            self.store.assume(uid, pod.key, st.node_ids[idx], slots, now, detail=f"policy={self.policy_name}")
        except DoubleAssignment as exc:
            return "nominations refused by the store", str(exc)
        book.waiting.pop(uid, None)
        self.record("start", uid=uid, node=st.node_ids[idx], gpus=[g for g, _ in slots], shared=bool(shared))
        if self.on_nomination is not None:
            self.on_nomination(pod, st.node_ids[idx], gpu_text(slots))
        outcome = book.last_outcome.get(uid, "nominated")
        if self.nudge is not None and uid != self.answering and outcome != "nominated" \
                and (self.serving or outcome != "unknown"):
            # kube-scheduler was told to wait, or its call was never answered by this process (and
            # this is not the pod's own filter call, whose answer is on its way): it would not ask
            # again before a cluster event or 60 s. An unknown pod nominated before the service
            # answers calls is nudged by due_nudges once it does (a nudge now would send the pod
            # to a server not yet listening, and back to the unschedulable queue).
            self.send_nudge(uid, st.node_ids[idx], gpu_text(slots), now, outcome == "unknown")
        return None

    def send_nudge(self, uid: str, node: str, gpus: str, now: float, unknown: bool) -> None:
        self.book.last_outcome[uid] = "nudged"
        if unknown:
            self.startup_nudges[uid] = (now, self.startup_nudges.get(uid, (0.0, 0))[1] + 1)
        self.nudge(self.book.pods[uid], node, gpus, True)

    def due_nudges(self, now: float, skip: Callable[[str], bool], again_after: float = NUDGE_AGAIN_S,
                   tries: int = NUDGE_TRIES) -> int:
        """Nudge every nominated pod on its own (``skip``: the uids of gangs and their pods) whose
        last extender call this process did not answer, once the service does; again after
        ``again_after`` seconds without a filter call for it, ``tries`` times in all. Returns the
        nudges sent."""
        sent = 0
        jobs = self.book.jobs
        for uid, outcome in list(self.book.last_outcome.items()):
            job = jobs.get(uid)
            if job is None or job.state is not ASSUMED or skip(uid):
                continue
            at, times = self.startup_nudges.get(uid, (0.0, 0))
            if outcome == "unknown" or (outcome == "nudged" and 0 < times < tries and now - at >= again_after):
                self.send_nudge(uid, self.state.node_ids[job.placement[0][0]], self.gpus_text(uid), now, True)
                sent += 1
        for uid in [u for u in self.startup_nudges if u not in jobs]:
            del self.startup_nudges[uid]
        return sent

    def nudge_wanted(self, uid: str, node: str) -> bool:
        """Whether a queued nudge of a pod on its own is still worth its API write: the pod is
        still nominated on ``node`` and kube-scheduler was not told "nominated" since."""
        job = self.book.jobs.get(uid)
        return (job is not None and job.state is ASSUMED and self.book.last_outcome.get(uid) != "nominated"
                and self.state.node_ids[job.placement[0][0]] == node)
