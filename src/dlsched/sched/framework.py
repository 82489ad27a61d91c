"""Placement in stages, after the Kubernetes scheduling framework: filter -> score -> reserve -> permit.

A :class:`PlacementPipeline` places one job of a VC:

1. **candidates**: open nodes with enough GPUs that have room (free GPUs from the VC's buckets;
   with sharing on, also GPUs below the per-GPU job cap);
2. **filter** plug-ins drop nodes, each with a reason (``filter(view, vc, job, node) -> str | None``);
3. **score** plug-ins rank the rest (``score(...) -> float`` in [0, 1], higher is better); the
   pipeline adds them with their weights and takes the best node (lowest VC index on ties);
4. **reserve**: the first scorer that can choose GPUs inside a node (``gpus(view, vc, job, node,
   room) -> mask``, e.g. the topology mapping) picks them; otherwise the lowest free GPUs;
5. **permit** plug-ins may turn a fit into a postponement (``permit(view, vc, job, fit) -> Fit``,
   e.g. TOPO-AWARE-P below its utility floor).

A job of several pods (``job.gpus_per_pod`` set, a gang) keeps the result when every node's
share is whole pods, else asks for pod-sized pieces (:mod:`dlsched.sched.pods`).

The result is a :class:`~dlsched.kernel.decisions.Fit` with one of three statuses. A pipeline
made of one bucket-based scorer and nothing else (the Helios consolidate, best-fit, first-fit,
spread) uses that scorer's exact ``fast_place``: a few integer operations per job instead of a
scan over nodes, and exactly the reference's choices.

**Sharing** (``share=True`` and ``max_jobs_per_gpu > 1``): such a pipeline first tries that same
exclusive ``fast_place`` -- idle GPUs first, as without sharing -- and joins busy GPUs (the
stages above, with the room of shared GPUs) only when idle GPUs cannot take the job. A placer
that wants packing says so with ``packs = True`` and always goes through the stages. Room and the
scores of plug-ins that define ``score_rows`` (Horus's cost) come from the per-GPU load index
(:mod:`dlsched.sched.sharing.index`), decision for decision the same as the per-node scan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

import numpy as np

from dlsched.core.bits import set_bits
from dlsched.core.job import Job
from dlsched.kernel.decisions import Fit, Placement, Status
from dlsched.kernel.state import VcState
from dlsched.kernel.view import ClusterView
from dlsched.sched.gpus import nodes_with_at_least, take_lowest
from dlsched.sched.pods import place_pods
from dlsched.sched.protocols import FastPlacer, Filter, Permit, Picker, RowScorer, Scorer  # noqa: F401
from dlsched.sched.sharing.index import bits_mask, mask_rows
from dlsched.sched.sharing.load import too_small

_FITS, _UNSCHED = Status.FITS, Status.UNSCHEDULABLE


_OBSERVER_HOOKS = ("started", "stopped", "node_changed", "predictions_changed")


def shared_gpu_use(view: ClusterView, node: int, shared: int) -> dict[int, float]:
    """Predicted memory held on each GPU of ``shared`` (a bitmask of the node's GPUs) by its
    holders: GPU bit -> MiB, one pass over the node's holders. A holder without a memory
    prediction counts as the whole GPU, as :meth:`ClusterState.gpu_pred_mem` counts it."""
    capacity = view.node_mem[node]
    used: dict[int, float] = {}
    for other, m in view.node_holders[node].items():
        m &= shared
        if m:
            om = other.pred_gpu_mem_mib
            om = om if om == om else capacity  # noqa: PLR0124 - NaN: no prediction
            while m:
                low = m & -m
                used[low] = used.get(low, 0.0) + om
                m ^= low
    return used


class FastEntry:
    """``place`` on the fast path: the lone scorer's ``fast_place`` itself for every job but one
    of several pods (:mod:`dlsched.sched.pods`), which gets pod-sized pieces when the fast
    choice does not split into its pods. A class, not a closure: a deep copy of the pipeline
    (the forecasts of ``sim/forecast.py``) gets an entry bound to the copy."""

    __slots__ = ("fast", "pipeline")

    def __init__(self, pipeline: PlacementPipeline, fast) -> None:
        self.pipeline, self.fast = pipeline, fast

    def __call__(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        per = job.gpus_per_pod
        if per and job.gpus > per:
            return place_pods(self.pipeline, view, vc, job, self.fast)
        return self.fast(view, vc, job)


class PlacementPipeline:
    """Filters, weighted scorers, a GPU picker and permits for one job at a time."""

    use_index = True  # sharing: room and scores from the load index (False: the per-node scan)
    # a lone bucket scorer's exact fast_place (and Horus's free_fit) instead of the stages; read
    # when a pipeline is built (False: always the stages, see dlsched.sim.reference)
    fast_paths = True
    # sharing: the gang stage scores every node at once from the load index when every scorer
    # can (score_rows) and nothing filters (False: node by node, see dlsched.sim.reference)
    vector_gang = True

    def __init__(self, scorers: Sequence[tuple[object, float]], filters: Sequence[object] = (),
                 share: bool = False, name: str | None = None) -> None:
        if not scorers:
            raise ValueError("a placement needs at least one scorer")
        for scorer, weight in scorers:
            if not weight > 0:
                raise ValueError(f"scorer {scorer.name}: weight must be > 0, got {weight}")
        self.scorers = list(scorers)
        # a scorer that also defines filter() (e.g. ffd-util's utilisation bound) filters too
        self.filters = list(filters) + [s for s, _ in self.scorers if isinstance(s, Filter) and s not in filters]
        self.share = share
        self.name = name or "+".join(s.name if w == 1 else f"{s.name}:{w:g}" for s, w in self.scorers)
        plugins = [s for s, _ in self.scorers] + self.filters
        self.picker = next((s for s, _ in self.scorers if isinstance(s, Picker)), None)
        self.permits = [p for p in plugins if isinstance(p, Permit)]
        self.observers = [p for p in plugins if any(hasattr(p, h) for h in _OBSERVER_HOOKS)]
        # the indexes the driver makes for this placement (dlsched.sched.indexes): the load index
        # when sharing, and whatever a plug-in declares it reads through view.index(name)
        needs = ["load"] if share else []
        needs += [n for p in plugins for n in getattr(p, "needs_indexes", ())]
        self.needs_indexes = tuple(dict.fromkeys(needs))
        # a job that fits one node never spans nodes when a scorer says so (Helios consolidate)
        # all scorers can score every candidate node at once and nothing filters: vectorised
        self.vector_scores = not self.filters and all(isinstance(s, RowScorer) for s, _ in self.scorers)
        self.single_node_only = any(getattr(s, "single_node_only", False) for s, _ in self.scorers)
        only = self.scorers[0][0]
        # sharing on, a bucket placer alone that does not ask for packing: idle GPUs first, by its
        # exact exclusive choice; the per-node sharing stages only when idle GPUs cannot take the job
        self.idle_first = None
        if len(self.scorers) == 1 and not self.filters and isinstance(only, FastPlacer):
            if not share and self.fast_paths:
                # exact bucket algorithm, no per-node scan; jobs of several pods go through
                # shape_pods' entry, installed only by a driver that has such jobs (the hot path
                # of a trace simulation stays one call)
                self.place = only.fast_place
            elif not getattr(only, "packs", False):
                self.idle_first = only.fast_place

    def fresh(self) -> PlacementPipeline:
        """The same placement with new plug-in instances (no index bound to any state yet): a
        forward copy of the cluster (start-time estimates, ``sim/eta.py``) gets its own indexes
        without going back to the registry."""
        import copy

        def renew(plugin):
            try:
                return type(plugin)()
            except TypeError:   # a plug-in built with arguments: an independent copy of it
                return copy.deepcopy(plugin)

        scorer_ids = {id(s) for s, _ in self.scorers}
        extra = [f for f in self.filters if id(f) not in scorer_ids]
        out = PlacementPipeline([(renew(s), w) for s, w in self.scorers], extra, share=self.share, name=self.name)
        if self.shapes_pods:
            out.shape_pods()
        return out

    def shape_pods(self) -> None:
        """Let the fast path cut jobs of several pods into their pods (:class:`FastEntry`). The
        stages path always does; a driver calls this before it wraps ``place`` when its jobs may
        carry a pod shape (the live service's gangs; a simulation whose jobs have
        ``gpus_per_pod``)."""
        fast = self.__dict__.get("place")
        if fast is not None and not isinstance(fast, FastEntry):
            self.place = FastEntry(self, fast)

    @property
    def shapes_pods(self) -> bool:
        """Whether every job of several pods is cut into its pods (the stages path always is)."""
        fast = self.__dict__.get("place")
        return fast is None or isinstance(fast, FastEntry)

    def place(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        """Run the stages for ``job``; see the module docstring. A job of several pods gets
        pod-sized pieces where the stages' choice does not split into them (``dlsched.sched.pods``)."""
        per = job.gpus_per_pod
        if per and job.gpus > per:
            return place_pods(self, view, vc, job, self._stages)
        return self._stages(view, vc, job)

    def _stages(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        need = job.gpus
        share = self.share and view.max_jobs_per_gpu > 1
        # the run shares GPUs, so memory is checked: nodes whose GPUs are smaller than the prediction
        small = too_small(vc, job) if view.max_jobs_per_gpu > 1 else 0
        if share and self.idle_first is not None:
            fit = self.idle_first(view, vc, job)
            if fit.status is _FITS and not (small and _on_nodes(view, fit, small)):
                return fit
        if need <= vc.max_node_gpus:
            fit = self._single_node(view, vc, job, share, small)
            if fit.status is not _FITS and not self.single_node_only and vc.free >= need:
                spanned = self._gang(view, vc, job)
                if spanned.status is _FITS:  # else keep the per-node reasons
                    fit = spanned
        else:
            fit = self._gang(view, vc, job)
        if small and fit.status is _FITS and _on_nodes(view, fit, small):   # a span over a too small node
            fit = _too_small_fit(job)
        if fit.status is _FITS:
            for plugin in self.permits:
                fit = plugin.permit(view, vc, job, fit)
                if fit.status is not _FITS:
                    break
        return fit

    @staticmethod
    def room(view: ClusterView, job: Job, node: int) -> int:
        """GPUs of ``node`` that may take ``job`` with sharing on: free GPUs, plus shared GPUs
        below the job cap whose memory left by the holders' *predictions* fits the job's
        predicted memory (a job without a memory prediction never shares)."""
        room = view.room_mask(node)                # free GPUs plus shared ones below the cap
        shared = room & view.node_mask[node]
        mem = job.pred_gpu_mem_mib
        if mem != mem:
            return room & ~shared
        if shared:  # = gpu_free_mem(node, g) < mem per shared GPU, in one pass over the holders
            capacity = view.node_mem[node]
            for low, u in shared_gpu_use(view, node, shared).items():
                if capacity - u < mem:
                    room &= ~low
        return room

    def scores(self, view: ClusterView, vc: VcState, job: Job) -> dict[int, float]:
        """The score stage alone: every node of ``vc`` that could take ``job`` on its own now
        (candidates with room, shared GPUs included when sharing is on, that pass the filters)
        -> the weighted mean of the scorers, each in [0, 1]. The live extender's prioritize
        answers from it, so it ranks nodes exactly as :meth:`place` would choose among them."""
        nodes = vc.nodes
        out: dict[int, float] = {}
        for rows, value in self.score_parts(view, vc, job):
            ids = map(nodes.__getitem__, rows.tolist())
            if isinstance(value, float):
                out.update(dict.fromkeys(ids, value))
            else:
                out.update(zip(ids, value.tolist()))
        return out

    def score_parts(self, view: ClusterView, vc: VcState, job: Job) -> Iterator[tuple[np.ndarray, float | np.ndarray]]:
        """:meth:`scores` in pieces, as (VC-local rows, their score: one float for them all, or
        an array of one each), in the order :meth:`scores` lists them: the live prioritize
        fills an array from them over 5,000 nodes without a dict of them."""
        share = self.share and view.max_jobs_per_gpu > 1
        wsum = sum(w for _, w in self.scorers)
        nodes, filters, scorers = vc.nodes, self.filters, self.scorers
        cand = self._candidates(view, vc, job, share, too_small(vc, job) if view.max_jobs_per_gpu > 1 else 0)
        if share and cand & (cand - 1) and self.vector_scores and self.use_index:
            # every scorer scores all candidates at once from the load index (the same floats as
            # score(), as in _single_node's sharing stage)
            rows = mask_rows(cand, len(nodes))
            yield rows, sum(w * s.score_rows(view, vc, job, rows) for s, w in scorers) / wsum
            return
        one = scorers[0][0].score if len(scorers) == 1 and not filters else None
        if one is not None and getattr(scorers[0][0], "score_by_free", False):
            # a score that depends on the free GPU count alone: one call per count (the VC's
            # free-count buckets), given to every candidate with that count at once
            for bucket in vc.buckets:
                mask = bucket & cand
                if mask:
                    cand ^= mask
                    rows = mask_rows(mask, len(nodes))
                    yield rows, float(one(view, vc, job, nodes[int(rows[0])]))
        left: list[int] = []
        values: list[float] = []
        for local in set_bits(cand):   # nodes left: each scored on its own
            node = nodes[local]
            if one is not None:
                left.append(local)
                values.append(one(view, vc, job, node))
            elif not any(f.filter(view, vc, job, node) for f in filters):
                left.append(local)
                values.append(sum(w * s.score(view, vc, job, node) for s, w in scorers) / wsum)
        if left:
            yield np.array(left, np.intp), np.array(values, np.float64)

    def _candidates(self, view: ClusterView, vc: VcState, job: Job, share: bool, small: int = 0) -> int:
        need = job.gpus
        cand = nodes_with_at_least(vc, need) if vc.free >= need else 0
        if share and vc.share_nodes & ~cand and self.use_index:
            # the room of every node at once from the load index (same floats as room())
            _, _, counts = view.index("load").room_counts(vc, job)
            cand |= bits_mask(counts >= need) & vc.share_nodes
        elif share:
            for local in set_bits(vc.share_nodes & ~cand):
                if self.room(view, job, vc.nodes[local]).bit_count() >= need:
                    cand |= 1 << local
        return cand & ~small   # free GPUs too: only where the node's GPU memory holds the prediction

    def _single_node(self, view: ClusterView, vc: VcState, job: Job, share: bool, small: int = 0) -> Fit:
        need = job.gpus
        cand = self._candidates(view, vc, job, share, small)
        if not cand:
            if small and self._candidates(view, vc, job, share):
                return _too_small_fit(job)
            return Fit(_UNSCHED, None, "no node has enough GPUs with room")
        rejected: dict[str, int] = {}
        best_node, best_score = -1, 0.0
        nodes = vc.nodes
        if share and self.vector_scores and self.use_index and cand & (cand - 1):
            # every scorer scores all candidates at once (load index arrays); same floats, and
            # argmax keeps the first (lowest VC index) of equal scores, as the loop below does
            rows = mask_rows(cand, len(nodes))
            total = 0.0
            for scorer, weight in self.scorers:
                total = total + weight * scorer.score_rows(view, vc, job, rows)
            best = int(np.argmax(total))
            best_node, best_score = nodes[int(rows[best])], float(total[best])
            cand = 0
        for local in set_bits(cand):
            node = nodes[local]
            for f in self.filters:
                why = f.filter(view, vc, job, node)
                if why:
                    rejected[why] = rejected.get(why, 0) + 1
                    break
            else:
                total = 0.0
                for scorer, weight in self.scorers:
                    total += weight * scorer.score(view, vc, job, node)
                if best_node < 0 or total > best_score:
                    best_node, best_score = node, total
        if best_node < 0:
            return Fit(_UNSCHED, None, "; ".join(f"{n} node(s): {why}" for why, n in sorted(rejected.items())))
        node_mask = view.node_mask
        room = self.room(view, job, best_node) if share else (~node_mask[best_node]
                                                              & ((1 << view.node_gpus[best_node]) - 1))
        mask = self.picker.gpus(view, vc, job, best_node, room) if self.picker is not None else 0
        if not mask:
            free = room & ~node_mask[best_node]
            mask = take_lowest(free, need) if free.bit_count() >= need else \
                free | take_lowest(room & ~free, need - free.bit_count())
        return Fit(_FITS, ((best_node, mask),), "", best_score, bool(mask & node_mask[best_node]))

    def _gang(self, view: ClusterView, vc: VcState, job: Job) -> Fit:
        """A job no single node can take: nodes with the most free GPUs first (fewest nodes), then
        the best-scored, then the lowest index; each gives its free GPUs until the job is placed."""
        need = job.gpus
        if vc.free < need:
            return Fit(_UNSCHED, None, f"{need} GPUs needed, {vc.free} free in VC {vc.name}")
        if self.vector_gang and self.vector_scores and self.use_index and view.max_jobs_per_gpu > 1:
            ranked = self._ranked_rows(view, vc, job)
        else:
            ranked = self._ranked(view, vc, job)
        out: list[tuple[int, int]] = []
        left = need
        for neg_k, _, local in ranked:
            node = vc.nodes[local]
            use = min(-neg_k, left)
            free = ~view.node_mask[node] & ((1 << view.node_gpus[node]) - 1)
            out.append((node, take_lowest(free, use)))
            left -= use
            if not left:
                placement: Placement = tuple(out)
                return Fit(_FITS, placement)
        return Fit(_UNSCHED, None, f"{need} GPUs needed, only {need - left} pass the filters")

    def _ranked(self, view: ClusterView, vc: VcState, job: Job) -> list[tuple[int, float, int]]:
        """The gang's order, node by node: (-free GPUs, -score, VC index) of every node with a
        free GPU that passes the filters, sorted."""
        ranked: list[tuple[int, float, int]] = []
        for k in range(vc.max_node_gpus, 0, -1):
            for local in set_bits(vc.buckets[k]):
                node = vc.nodes[local]
                if any(f.filter(view, vc, job, node) for f in self.filters):
                    continue
                total = sum(w * s.score(view, vc, job, node) for s, w in self.scorers)
                ranked.append((-k, -total, local))
        ranked.sort()
        return ranked

    def _ranked_rows(self, view: ClusterView, vc: VcState, job: Job) -> list[tuple[int, float, int]]:
        """:meth:`_ranked` with every node scored at once (``score_rows``, no filters): the
        same floats (each ``score_rows`` equals ``score`` float for float, summed from 0 in the
        same order), so the same tuples in the same order. On a congested VC a gang ranks most
        of its nodes, and the per-node cost scan was a fifth of a Horus run with sharing."""
        width = len(vc.nodes)
        parts, counts = [], []
        buckets = vc.buckets
        for k in range(vc.max_node_gpus, 0, -1):
            if buckets[k]:
                rows = mask_rows(buckets[k], width)
                parts.append(rows)
                counts.append(np.full(len(rows), -k, dtype=np.int64))
        if not parts:
            return []
        rows = parts[0] if len(parts) == 1 else np.concatenate(parts)
        total = 0
        for scorer, weight in self.scorers:   # as sum(): 0 + w1 * s1 + w2 * s2 ...
            total = total + weight * scorer.score_rows(view, vc, job, rows)
        neg_k = counts[0] if len(counts) == 1 else np.concatenate(counts)
        ranked = list(zip(neg_k.tolist(), (-total).tolist(), rows.tolist()))
        ranked.sort()
        return ranked


def _too_small_fit(job: Job) -> Fit:
    """The answer for a job that only nodes whose GPUs are smaller than its prediction could take."""
    return Fit(_UNSCHED, None, f"needs {job.pred_gpu_mem_mib:,.0f} MiB per GPU: no node whose GPUs have "
                               f"that much has enough GPUs with room")


def _on_nodes(view: ClusterView, fit: Fit, local_mask: int) -> bool:
    """Whether ``fit`` uses a node of ``local_mask`` (VC-local bits)."""
    local = view.node_local
    return any(local_mask >> local[node] & 1 for node, _ in fit.placement)


def room_of(view: ClusterView, job: Job, node: int) -> int:
    """GPUs of ``node`` that may take ``job``: free ones, plus (sharing on) shared ones whose
    predicted memory left fits the job and that are below the job cap."""
    if view.max_jobs_per_gpu > 1:
        return PlacementPipeline.room(view, job, node)
    if view.node_slot[node] < 0:
        return 0
    return ~view.node_mask[node] & ((1 << view.node_gpus[node]) - 1)
