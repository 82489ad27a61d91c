"""The extender's questions answered: filter (the nominated node, or none and why), and
prioritize (the nominated node first, the policy's placement scores for the others)."""

from __future__ import annotations

from collections import Counter, deque

import numpy as np

from dlsched.core.job import Job, JobState
from dlsched.service.adapter import Adapter
from dlsched.service.extender import NodeList
from dlsched.service.passes import Passes
from dlsched.service.pods import PodFacts

PENDING, RUNNING, ASSUMED = JobState.PENDING, JobState.RUNNING, JobState.ASSUMED
MAX_SCORE = 10  # the extender protocol's highest host priority
PRIORITY_TOP = MAX_SCORE - 2   # policy scores map to 1..9, below the nominated node's MAX_SCORE


class Answers:
    """Filter and prioritize, with the outcomes counted and the latest kept for the operator."""

    def __init__(self, adapter: Adapter, passes: Passes) -> None:
        self.adapter, self.passes = adapter, passes
        self.filter_outcomes: Counter[str] = Counter()   # nominated / waiting / refused (a uid the API server does not have)
        self.recent_filters: deque[dict] = deque(maxlen=50)   # the last answers, with the reasons given
        self.vc_arrays: dict[int, tuple[object, np.ndarray]] = {}   # id(VcState) -> (it, its node ids)

    def verdict(self, pod: PodFacts, node_names: list[str]) -> tuple[list[str], str]:
        """The filter's answer: (nodes that pass, the one reason every other node fails with)."""
        ad = self.adapter
        if pod.gpus == 0:
            ad.book.zero_gpu_seen(pod)
            return list(node_names), ""
        refused = ad.pod_offered(pod)
        if refused:
            return self.answer(pod, "refused", [], node_names, refused)
        self.note_offered(pod.uid, node_names)
        ad.noms.answering = pod.uid
        try:
            self.passes.run_pass()
            gang = ad.gangs.verdict(pod.uid, node_names)   # gang hook
            if gang is not None:
                return self.answer(pod, gang[0], gang[1], node_names, gang[2])
            job = ad.book.jobs.get(pod.uid)
            if job is not None and job.state is ASSUMED:
                node = ad.state.node_ids[job.placement[0][0]]
                if node not in node_names:
                    # nominated before kube-scheduler said where the pod may go (its selector,
                    # affinity, taints): decided again at once, on the nodes it offered
                    ad.forget(job, f"nominated {node}, which the scheduler did not offer")
                    ad.counters["nominations moved to an offered node"] += 1
                    self.passes.run_pass()
            if job is not None and job.state is ASSUMED:
                node = ad.state.node_ids[job.placement[0][0]]
                why = f"dlsched ({ad.policy.name}) nominated {node} for this pod"
                return self.answer(pod, "nominated", [node], node_names, why)
        finally:
            ad.noms.answering = ""
        why = ad.why_waiting(pod.uid)
        return self.answer(pod, "waiting", [], node_names, why)

    def nominated_offered(self, pod: PodFacts, node_names: list[str]) -> bool:
        """Whether the pod (a single pod, not a gang's) is nominated already on a node that
        kube-scheduler offers: its verdict needs no node the watch has not shown yet."""
        ad = self.adapter
        if ad.gangs.by_uid.get(pod.uid) is not None:
            return False
        job = ad.book.jobs.get(pod.uid)
        if job is None or job.state is not ASSUMED:
            return False
        return ad.state.node_ids[job.placement[0][0]] in node_names

    def note_offered(self, uid: str, node_names: list[str]) -> None:
        """Remember the nodes kube-scheduler offered for this pod (the set is shared while
        kube-scheduler sends the same list for pod after pod: kept with the list, ``NodeList.memo``)."""
        book = self.adapter.book
        memo = NodeList.of(node_names).memo
        last_set = memo.get("set")
        if last_set is None:
            last_set = memo["set"] = frozenset(node_names)
        if uid in book.jobs and book.offered.get(uid) is not last_set:
            book.offered[uid] = last_set
            job = book.jobs[uid]
            if job.state is PENDING:
                self.adapter.mark(job.vc_state.vid)   # other nodes now: worth another pass

    def answer(self, pod: PodFacts, outcome: str, passed: list[str], node_names: list[str],
               why: str) -> tuple[list[str], str]:
        """Count a filter answer and keep it (with the reason the other nodes were rejected)."""
        self.filter_outcomes[outcome] += 1
        if pod.uid in self.adapter.book.jobs:
            self.adapter.book.last_outcome[pod.uid] = outcome
        self.recent_filters.append({"at": self.adapter.last_now, "pod": pod.key, "outcome": outcome,
                                    "passed": passed, "rejected": len(node_names) - len(passed), "reason": why})
        return passed, why

    def priorities(self, pod: PodFacts, node_names: list[str]) -> np.ndarray:
        """The score of each of ``node_names``, in order: the nominated node MAX_SCORE (10); every
        other node the policy's placement scores for this pod on it, mapped to 1..9
        (:meth:`policy_scores`), or 0 where the pod cannot go (no room, the placement's filters,
        another VC, unknown to dlsched). An int array, not pairs: the reply is written from it.
        Read through arrays (a score per node id, the offered names' ids kept while kube-scheduler
        sends the same list): a dict lookup per offered node cost 3 ms a call at 5,000 nodes."""
        ad = self.adapter
        job = ad.book.jobs.get(pod.uid)
        if job is None or job.state is RUNNING:
            return np.zeros(len(node_names), np.int64)
        table = self.score_table(job)
        if job.state is ASSUMED:
            table[job.placement[0][0]] = MAX_SCORE
        return table[self.ids_of(node_names)]

    def ids_of(self, node_names: list[str]) -> np.ndarray:
        """Each offered name's node id in the state, -1 for a name the state does not have (the
        score table's last slot, always 0). Kept with the name list (``NodeList.memo``, shared by
        every core of the process) for this state while its nodes stay the same: ids only grow
        and removals only shrink the index, so the two lengths name the set."""
        state = self.adapter.state
        key = (len(state.node_ids), len(state.node_index))
        memo = NodeList.of(node_names).memo
        kept = memo.get("ids")
        if kept is not None and kept[0] is state and kept[1] == key:
            return kept[2]
        index = state.node_index
        ids = np.fromiter((index.get(name, -1) for name in node_names), np.intp, len(node_names))
        memo["ids"] = (state, key, ids)
        return ids

    def unknown_offered(self, node_names: list[str]) -> list[str]:
        """The offered names the state does not have, kept with the list as :meth:`ids_of` keeps
        its ids (safe without the lock: the key is read before the look-ups, and a node that
        joins or leaves meanwhile changes it)."""
        ids = self.ids_of(node_names)
        memo = NodeList.of(node_names).memo
        kept = memo.get("unknown")
        if kept is not None and kept[0] is ids:
            return kept[1]
        missing = [node_names[i] for i in np.flatnonzero(ids < 0).tolist()]
        memo["unknown"] = (ids, missing)
        return missing

    def score_table(self, job: Job) -> np.ndarray:
        """:meth:`policy_scores` as an array over node ids (0 where not scored), one slot more,
        filled from the placement's score pieces (``PlacementPipeline.score_parts``)."""
        ad = self.adapter
        table = np.zeros(len(ad.state.node_ids) + 1, np.int64)
        parts = getattr(getattr(ad.policy, "placer", None), "score_parts", None)
        if parts is None:
            return table
        ad.view.now = ad.now()
        vc = job.vc_state
        ids = self.vc_ids(vc)
        for rows, value in parts(ad.view, vc, job):
            table[ids[rows]] = priority(value) if isinstance(value, float) else priorities_of(value)
        return table

    def vc_ids(self, vc) -> np.ndarray:
        """The VC's node ids by local row, as an array (kept while the VC has as many nodes: its
        list only grows)."""
        kept = self.vc_arrays.get(id(vc))
        if kept is None or kept[0] is not vc or len(kept[1]) != len(vc.nodes):
            kept = (vc, np.array(vc.nodes, np.intp))
            self.vc_arrays[id(vc)] = kept
        return kept[1]

    def placement_scores(self, job: Job) -> dict[int, float]:
        """The placement's score stage for ``job`` (``PlacementPipeline.scores``) by node id; empty
        for a placer without one."""
        ad = self.adapter
        scores = getattr(getattr(ad.policy, "placer", None), "scores", None)
        if scores is None:
            return {}
        ad.view.now = ad.now()
        return scores(ad.view, job.vc_state, job)

    def policy_scores(self, job: Job) -> dict[str, int]:
        """The placement's score stage for ``job`` (``PlacementPipeline.scores``: every node of
        its VC that could take it now and passes the filters -> the weighted mean of the scorers
        in [0, 1]) as ``1 + floor(8 * s + 0.5)`` in 1..9, so that any node the policy would accept
        outranks one it would not, and the nominated node (10) outranks them all. A node the job
        holds GPUs on (its nomination) is scored as it stands, the job's GPUs taken."""
        raw = self.placement_scores(job)
        ids = self.adapter.state.node_ids
        mapped = {total: priority(total) for total in set(raw.values())}   # few distinct scores, many nodes
        return {ids[node]: mapped[total] for node, total in raw.items()}


def priority(total: float) -> int:
    """A placement score in [0, 1] (clipped) as an extender priority in 1..PRIORITY_TOP + 1."""
    return 1 + int(PRIORITY_TOP * (0.0 if total < 0.0 else 1.0 if total > 1.0 else total) + 0.5)


def priorities_of(totals: np.ndarray) -> np.ndarray:
    """:func:`priority` of each total at once (the same float arithmetic; ``int`` of a
    non-negative float is its floor, as ``astype`` truncates)."""
    return 1 + (PRIORITY_TOP * np.clip(totals, 0.0, 1.0) + 0.5).astype(np.int64)
