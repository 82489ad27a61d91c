"""ClusterState: the one owner of cluster occupancy, changed only by explicit events.

Per node it keeps the free-GPU count and a bitmask of occupied GPUs (GPUs are individually
addressable: bit g of a node's mask is its GPU g). Per VC it keeps ``buckets[k]``: a bitmask of
the VC's powered nodes (VC-local index) that have exactly ``k`` free GPUs, so best-fit and
whole-node searches are a few integer operations instead of a scan. A GPU may hold several
jobs when a decision says ``shared`` (co-location); the extra holders are counted per GPU.
"""

from __future__ import annotations

from dlsched.core.cluster import ClusterSpec
from dlsched.core.bits import set_bits
from dlsched.core.job import Job, JobState


class StateError(RuntimeError):
    """An event that would corrupt the cluster state (double booking, double finish, ...)."""


class VcState:
    """Occupancy of one virtual cluster: nodes ``node_lo .. node_hi-1`` of the cluster."""

    __slots__ = ("name", "vid", "node_lo", "node_hi", "total_gpus", "free", "buckets", "queue",
                 "running", "max_node_gpus", "gpus_per_node", "busy", "pending")

    def __init__(self, name: str, vid: int, node_lo: int, node_hi: int, node_gpus: list[int]) -> None:
        self.name = name
        self.vid = vid
        self.node_lo = node_lo
        self.node_hi = node_hi
        gpus = node_gpus[node_lo:node_hi]
        self.total_gpus = sum(gpus)
        self.free = self.total_gpus
        self.max_node_gpus = max(gpus, default=0)
        # gpus_per_node is set only when the VC is homogeneous (consolidate needs it)
        self.gpus_per_node = gpus[0] if gpus and all(g == gpus[0] for g in gpus) else 0
        self.buckets = [0] * (self.max_node_gpus + 1)
        for local, g in enumerate(gpus):
            self.buckets[g] |= 1 << local
        self.queue = None          # set by the engine: the policy's queue for this VC
        self.running: dict[Job, None] = {}
        self.busy = 0              # GPUs held by at least one job
        self.pending = 0           # jobs in the queue

    @property
    def nodes(self) -> range:
        return range(self.node_lo, self.node_hi)


class ClusterState:
    """Nodes, GPUs, VCs and job states. Mutated only through the event methods below."""

    def __init__(self, cluster: ClusterSpec) -> None:
        self.cluster = cluster
        self.node_gpus: list[int] = []
        self.node_free: list[int] = []
        self.node_mask: list[int] = []       # bit g set: GPU g holds >= 1 job
        self.node_jobs: list[int] = []       # jobs holding at least one GPU of the node
        self.node_vc: list[int] = []
        self.node_powered: list[bool] = []
        self.shared: dict[tuple[int, int], int] = {}  # (node, gpu) -> extra holders beyond 1
        self.vcs: list[VcState] = []
        self.vc_index: dict[str, int] = {}
        by_vc: dict[str, list] = {vc: [] for vc in cluster.vcs}
        for node in cluster.nodes:
            if node.vc not in by_vc:
                raise ValueError(f"node {node.node_id} names unknown VC {node.vc!r}")
            by_vc[node.vc].append(node)
        self.node_ids: list[str] = []
        for vid, (vc, nodes) in enumerate(by_vc.items()):
            lo = len(self.node_gpus)
            for node in nodes:
                self.node_ids.append(node.node_id)
                self.node_gpus.append(node.gpus)
                self.node_free.append(node.gpus)
                self.node_mask.append(0)
                self.node_jobs.append(0)
                self.node_vc.append(vid)
                self.node_powered.append(True)
            self.vcs.append(VcState(vc, vid, lo, len(self.node_gpus), self.node_gpus))
            self.vc_index[vc] = vid
        self.total_gpus = sum(self.node_gpus)
        self.powered_gpus = self.total_gpus
        self.powered_count = len(self.node_gpus)
        self.busy_gpus = 0
        self.finished = 0
        self._enq = 0
        self._run = 0

    # -- queries -----------------------------------------------------------------------
    def vc_of(self, job: Job) -> VcState:
        try:
            return self.vcs[self.vc_index[job.vc]]
        except KeyError:
            raise StateError(f"job {job.job_id}: unknown VC {job.vc!r}") from None


    # -- events ------------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> VcState:
        if job.state is not JobState.CREATED:
            raise StateError(f"job {job.job_id} submitted twice")
        vc = job.vc_state
        if vc is None or vc is not self.vcs[vc.vid]:  # not bound to this state yet
            vc = job.vc_state = self.vc_of(job)
        job.state = JobState.PENDING
        job.wait_since = now
        self._enq += 1
        job.enq_seq = self._enq
        vc.queue.push(job)
        vc.pending += 1
        return vc

    def start(self, job: Job, placement, now: float, shared: bool = False) -> VcState:
        if job.state is not JobState.PENDING:
            raise StateError(f"job {job.job_id} started while {job.state.name}")
        vc = job.vc_state
        if len(placement) == 1 and not shared:
            # common case, inlined: one node, exclusive GPUs
            node, mask = placement[0]
            if (node < vc.node_lo or node >= vc.node_hi or not self.node_powered[node]
                    or self.node_mask[node] & mask or mask >> self.node_gpus[node]):
                self._allocate(job, vc, placement, shared)  # raises with the precise reason
            n = mask.bit_count()
            old = self.node_free[node]
            local = 1 << (node - vc.node_lo)
            buckets = vc.buckets
            buckets[old] &= ~local
            buckets[old - n] |= local
            self.node_free[node] = old - n
            self.node_mask[node] |= mask
            self.node_jobs[node] += 1
            vc.free -= n
            vc.busy += n
            self.busy_gpus += n
        else:
            self._allocate(job, vc, placement, shared)
        vc.queue.remove(job)
        vc.pending -= 1
        vc.running[job] = None
        job.state = JobState.RUNNING
        job.placement = placement
        if job.start_time < 0:
            job.start_time = now
        job.queue_delay += now - job.wait_since
        job.run_since = now
        self._run += 1
        job.run_seq = self._run
        return vc

    def finish(self, job: Job, now: float) -> VcState:
        if job.state is not JobState.RUNNING:
            raise StateError(f"job {job.job_id} finished while {job.state.name} (every job ends exactly once)")
        vc = job.vc_state
        placement = job.placement
        if len(placement) == 1 and not self.shared:
            node, mask = placement[0]
            n = mask.bit_count()
            old = self.node_free[node]
            local = 1 << (node - vc.node_lo)
            buckets = vc.buckets
            buckets[old] &= ~local
            buckets[old + n] |= local
            self.node_free[node] = old + n
            self.node_mask[node] &= ~mask
            self.node_jobs[node] -= 1
            job.placement = None
            vc.free += n
            vc.busy -= n
            self.busy_gpus -= n
        else:
            self._release(job, vc)
        del vc.running[job]
        job.state = JobState.FINISHED
        job.end_time = now
        job.remaining = 0.0
        self.finished += 1
        return vc

    def preempt(self, job: Job, now: float) -> VcState:
        if job.state is not JobState.RUNNING:
            raise StateError(f"job {job.job_id} preempted while {job.state.name}")
        vc = job.vc_state
        self._release(job, vc)
        del vc.running[job]
        job.state = JobState.PENDING
        job.preemptions += 1
        job.wait_since = now
        job.epoch += 1
        self._enq += 1
        job.enq_seq = self._enq
        vc.queue.push(job)
        vc.pending += 1
        return vc

    def power_off(self, node: int) -> None:
        """Power a node off: only an idle, powered node may be switched off."""
        if not self.node_powered[node]:
            raise StateError(f"node {self.node_ids[node]} is already off")
        if self.node_mask[node]:
            raise StateError(f"node {self.node_ids[node]} is busy and cannot be powered off")
        vc = self.vcs[self.node_vc[node]]
        g = self.node_gpus[node]
        vc.buckets[g] &= ~(1 << (node - vc.node_lo))
        vc.free -= g
        self.node_free[node] = 0
        self.node_powered[node] = False
        self.powered_gpus -= g
        self.powered_count -= 1

    def power_on(self, node: int) -> None:
        if self.node_powered[node]:
            raise StateError(f"node {self.node_ids[node]} is already on")
        vc = self.vcs[self.node_vc[node]]
        g = self.node_gpus[node]
        vc.buckets[g] |= 1 << (node - vc.node_lo)
        vc.free += g
        self.node_free[node] = g
        self.node_powered[node] = True
        self.powered_gpus += g
        self.powered_count += 1

    # -- allocation bookkeeping -----------------------------------------------------------
    def _allocate(self, job: Job, vc: VcState, placement, shared: bool) -> None:
        node_free, node_mask, buckets, lo = self.node_free, self.node_mask, vc.buckets, vc.node_lo
        taken = 0
        for node, mask in placement:
            if node < lo or node >= vc.node_hi:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} is not in VC {vc.name}")
            if not self.node_powered[node]:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} is powered off")
            if mask >> self.node_gpus[node]:
                raise StateError(f"job {job.job_id}: GPU index beyond node {self.node_ids[node]}")
            overlap = node_mask[node] & mask
            if overlap and not shared:
                raise StateError(f"job {job.job_id}: GPUs {set_bits(overlap)} of node {self.node_ids[node]} "
                                 "are already held (double booking)")
            new = mask & ~overlap
            if overlap:
                for g in set_bits(overlap):
                    self.shared[(node, g)] = self.shared.get((node, g), 0) + 1
            if new:
                n_new = new.bit_count()
                old = node_free[node]
                local = 1 << (node - lo)
                buckets[old] &= ~local
                buckets[old - n_new] |= local
                node_free[node] = old - n_new
                node_mask[node] |= new
                taken += n_new
            self.node_jobs[node] += 1
        vc.free -= taken
        vc.busy += taken
        self.busy_gpus += taken

    def _release(self, job: Job, vc: VcState) -> None:
        node_free, node_mask, buckets, lo = self.node_free, self.node_mask, vc.buckets, vc.node_lo
        freed = 0
        for node, mask in job.placement:
            gone = mask
            if self.shared:
                for g in set_bits(mask):
                    extra = self.shared.get((node, g), 0)
                    if extra:
                        gone &= ~(1 << g)
                        if extra == 1:
                            del self.shared[(node, g)]
                        else:
                            self.shared[(node, g)] = extra - 1
            if gone:
                n = gone.bit_count()
                old = node_free[node]
                local = 1 << (node - lo)
                buckets[old] &= ~local
                buckets[old + n] |= local
                node_free[node] = old + n
                node_mask[node] &= ~gone
                freed += n
            self.node_jobs[node] -= 1
        job.placement = None
        vc.free += freed
        vc.busy -= freed
        self.busy_gpus -= freed

    # -- self-check ---------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Recompute everything from the running jobs and compare (used in tests)."""
        held: dict[int, int] = {}
        counts: dict[tuple[int, int], int] = {}
        for vc in self.vcs:
            for job in vc.running:
                if job.state is not JobState.RUNNING:
                    raise StateError(f"job {job.job_id} listed as running while {job.state.name}")
                for node, mask in job.placement:
                    held[node] = held.get(node, 0) | mask
                    for g in set_bits(mask):
                        counts[(node, g)] = counts.get((node, g), 0) + 1
        for (node, g), n in counts.items():
            if n - 1 != self.shared.get((node, g), 0):
                raise StateError(f"GPU {g} of node {self.node_ids[node]}: {n} holders, books say "
                                 f"{self.shared.get((node, g), 0) + 1}")
        busy = 0
        for node in range(len(self.node_gpus)):
            mask = held.get(node, 0)
            if mask != self.node_mask[node]:
                raise StateError(f"node {self.node_ids[node]}: GPU mask out of sync")
            expect = (self.node_gpus[node] - mask.bit_count()) if self.node_powered[node] else 0
            if self.node_free[node] != expect:
                raise StateError(f"node {self.node_ids[node]}: free {self.node_free[node]} != {expect}")
            busy += mask.bit_count()
        if busy != self.busy_gpus:
            raise StateError(f"busy GPUs {self.busy_gpus} != recomputed {busy}")
        for vc in self.vcs:
            free = sum(self.node_free[n] for n in vc.nodes)
            if free != vc.free:
                raise StateError(f"VC {vc.name}: free {vc.free} != recomputed {free}")
            for k, bucket in enumerate(vc.buckets):
                for local in set_bits(bucket):
                    node = vc.node_lo + local
                    if not self.node_powered[node] or self.node_free[node] != k:
                        raise StateError(f"VC {vc.name}: bucket {k} lists node {self.node_ids[node]} wrongly")

