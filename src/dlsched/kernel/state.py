"""ClusterState: the one owner of cluster occupancy, changed only through explicit transitions.

Transitions: ``submit``, ``start`` (= assume; ``confirm`` makes it final, ``forget`` undoes it),
``finish``, ``terminate`` (ended for good before completing: a max runtime), ``fail`` (back to the
queue, attempt counted), ``preempt``, node ``add_node`` /
``remove_node`` / ``cordon`` / ``uncordon`` / ``set_gpu_type``, ``power_off`` / ``power_on``. The decision dispatcher
(:mod:`dlsched.kernel.decide`) carries out policy decisions through them for every driver. They
change occupancy and the run record only: how fast a job runs, when it crashes and how much work
a stop books are the simulated backend's physics (:mod:`dlsched.sim.physics`), never the
kernel's. The state integrates busy and powered GPUs over time
(cluster-wide and per VC) at every transition, so the levels are exact; observers (plug-in
indexes) are told about every transition *before* occupancy changes, and clock callbacks (the
metrics recorder's timeline) run before the first transition at or after the time they asked for.

Occupancy is GPU-level. Per node: a bitmask of GPUs holding at least one job (``node_mask``),
the count of GPUs open to new jobs (``node_free``: 0 while the node is off, cordoned or
removed) and its holders (``node_holders[node]``: job -> GPU mask), from which each GPU's
holders and their predicted memory (what policies see) follow.
With ``max_jobs_per_gpu > 1`` each GPU also counts its holders and ``node_share`` marks the
GPUs that hold jobs but have room for one more; per VC, ``share_nodes`` marks nodes that have
such GPUs, so sharing placers find room as cheaply as free GPUs. Per VC, ``buckets[k]`` is a
bitmask (bit = VC-local node index) of open nodes with exactly ``k`` free GPUs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import replace

from dlsched.core.bits import bit_tuple, set_bits
from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec
from dlsched.core.job import Job, JobState
from dlsched.kernel.stop import StopReason

_CREATED, _PENDING, _RUNNING = JobState.CREATED, JobState.PENDING, JobState.RUNNING
_ASSUMED, _FINISHED = JobState.ASSUMED, JobState.FINISHED
# what observers are told (module globals: one bytecode to load, as the string literals were)
_WHY_FINISH, _WHY_PREEMPT = StopReason.FINISHED, StopReason.PREEMPTED
_WHY_FAIL, _WHY_FORGET = StopReason.FAILED, StopReason.FORGOTTEN

# The exclusive shortcut of start() and finish(): a placement on this many nodes without sharing
# books and releases its GPUs inline (the body of _allocate / _release for one node, ~2x faster).
# 1 in every run; 0 sends every placement through _allocate / _release, the general path that
# dlsched.sim.reference.reference_paths() compares against (a module constant read where the
# literal 1 was, so the switch costs the hot path no instruction).
EXCLUSIVE_SHORTCUT_NODES = 1


class StateError(RuntimeError):
    """A transition that would corrupt the cluster state (double booking, double finish, ...)."""


class VcState:
    """Occupancy of one virtual cluster. ``nodes[local]`` is the global index of VC-local node
    ``local``; bucket bits are local indices, so small VCs keep small bitmasks."""

    __slots__ = ("name", "vid", "nodes", "total_gpus", "free", "buckets", "queue", "running",
                 "max_node_gpus", "gpus_per_node", "min_gpu_mem", "max_gpu_mem", "mem_levels", "busy", "pending",
                 "share_nodes", "area", "t_last")

    def __init__(self, name: str, vid: int) -> None:
        self.name = name
        self.vid = vid
        self.nodes: list[int] = []
        self.total_gpus = 0        # GPUs of present nodes
        self.free = 0              # GPUs open to new jobs
        self.max_node_gpus = 0
        self.gpus_per_node = 0     # set only when the VC is homogeneous (consolidate needs it)
        self.min_gpu_mem = 0.0     # the least and the most memory one GPU of a present node has (MiB)
        self.max_gpu_mem = 0.0
        # per memory per GPU, ascending: (MiB, local bits of its nodes, GPUs of nodes with at least
        # that much, GPUs of the largest such node)
        self.mem_levels: tuple[tuple[float, int, int, int], ...] = ()
        self.buckets: list[int] = [0]
        self.queue = None          # the policy's queue for this VC
        self.running: dict[Job, None] = {}
        self.busy = 0              # GPUs held by at least one job
        self.pending = 0           # jobs in the queue
        self.share_nodes = 0       # local bits: open nodes with a GPU that has room for one more job
        self.area = 0.0            # integral of busy GPUs over time (GPU-seconds) up to t_last
        self.t_last = 0.0


class ClusterState:
    """Nodes, GPUs, VCs and job states. Mutated only through the transitions below."""

    def __init__(self, cluster: ClusterSpec, new_queue: Callable[[], object] | None = None,
                 max_jobs_per_gpu: int = 1, observers: Sequence[object] = ()) -> None:
        if max_jobs_per_gpu < 1:
            raise ValueError("max_jobs_per_gpu must be >= 1")
        self.cluster = cluster
        self.new_queue = new_queue
        self.cap = max_jobs_per_gpu
        self.node_specs: list[NodeSpec] = []
        self.node_ids: list[str] = []
        self.node_index: dict[str, int] = {}
        self.node_gpus: list[int] = []
        self.node_free: list[int] = []
        self.node_mask: list[int] = []       # bit g set: GPU g holds >= 1 job
        self.node_holders: list[dict[Job, int]] = []
        self.node_vc: list[int] = []
        self.node_local: list[int] = []
        self.node_powered: list[bool] = []
        self.node_cordoned: list[bool] = []
        self.node_removed: list[bool] = []
        self.node_slot: list[int] = []       # the node's VC id while open (powered, not cordoned, not
                                             # removed: new jobs may go there), else -1
        self.node_mem: list[float] = []      # memory of each GPU of the node (MiB)
        self.node_share: list[int] = []      # sharing only: GPUs with 1 <= holders < cap
        self.gpu_count: list[list[int]] = []  # sharing only: holders per GPU
        self.vcs: list[VcState] = []
        self.vc_index: dict[str, int] = {}
        self.jobs: dict[str, Job] = {}
        self.total_gpus = 0
        self.powered_gpus = 0
        self.powered_count = 0
        self.busy_gpus = 0
        self.finished = 0
        self.failed = 0
        self.terminated: dict[Job, StopReason] = {}   # jobs ended before they completed, and why
        self.postponed = 0
        self._enq = 0
        self._run = 0
        # time-weighted levels: exact only if updated at every change, which only the state sees
        self.t_last = 0.0
        self.busy_area = 0.0       # integral of busy GPUs (GPU-seconds)
        self.powered_area = 0.0    # integral of powered GPUs
        self.next_tick = float("inf")
        self._clock: list[Callable[[float], float]] = []
        self.n_pending = 0         # jobs queued, all VCs
        self.n_running = 0         # jobs holding GPUs (running or assumed), all VCs
        self.hosts: dict[Job, VcState] = {}  # borrowing jobs (queues with quotas) -> the lender VC
        self._observers: list[object] = []
        self._on_submit: tuple = ()
        self._on_start: tuple = ()
        self._on_stop: tuple = ()
        self._on_node: tuple = ()
        self._on_predict: tuple = ()
        for vc in cluster.vcs:
            self._new_vc(vc)
        for node in cluster.nodes:
            if node.vc not in self.vc_index:
                raise ValueError(f"node {node.node_id} names unknown VC {node.vc!r}")
            self._add_node(node, 0.0)
        for vc in self.vcs:  # once per VC, not once per node
            self._refresh_homogeneous(vc)
        for obs in observers:
            self.add_observer(obs)

    # -- observers ----------------------------------------------------------------------
    def add_observer(self, obs: object) -> None:
        """Register an observer; it implements any of ``submitted(job, vc, now)``,
        ``started(job, vc, now)``, ``stopped(job, vc, now, why)``, ``node_changed(node, now)``,
        ``predictions_changed(job)``."""
        self._observers.append(obs)
        self._hooks()

    def remove_observer(self, obs: object) -> None:
        """Stop telling ``obs`` (the live service replaces its queue manager when the queue
        configuration changes)."""
        self._observers = [o for o in self._observers if o is not obs]
        self._hooks()

    def _hooks(self) -> None:
        self._on_submit = tuple(o.submitted for o in self._observers if hasattr(o, "submitted"))
        self._on_start = tuple(o.started for o in self._observers if hasattr(o, "started"))
        self._on_stop = tuple(o.stopped for o in self._observers if hasattr(o, "stopped"))
        self._on_node = tuple(o.node_changed for o in self._observers if hasattr(o, "node_changed"))
        self._on_predict = tuple(o.predictions_changed for o in self._observers
                                 if hasattr(o, "predictions_changed"))

    @property
    def observers(self) -> tuple[object, ...]:
        """The registered observers, in registration order (read-only: the start-time estimate's
        forward copy finds the queue manager that runs on this state among them)."""
        return tuple(self._observers)

    def predictions_changed(self, job: Job) -> None:
        """A running job's predicted utilisation or memory was corrected
        (:func:`dlsched.kernel.correction.observe`): observers that sum predicted load re-read it.
        Occupancy is unchanged, so this is a notice, not a transition."""
        for cb in self._on_predict:
            cb(job)

    def add_clock(self, callback: Callable[[float], float]) -> None:
        """``callback(now) -> next time`` runs before the first transition at or after the time
        it asked for (e.g. a timeline sampler), seeing the state as it was up to ``now``."""
        self._clock.append(callback)
        self.next_tick = -float("inf")

    def begin(self, t0: float) -> None:
        """Start the time-weighted integrals at ``t0``."""
        self.t_last = t0
        self.busy_area = self.powered_area = 0.0
        for vc in self.vcs:
            vc.area, vc.t_last = 0.0, t0

    def advance(self, now: float) -> None:
        """Integrate the levels up to ``now`` (nothing changed since ``t_last``) and run the clock
        callbacks that are due. Every transition does this first."""
        dt = now - self.t_last
        if dt:
            self.busy_area += self.busy_gpus * dt
            self.powered_area += self.powered_gpus * dt
            self.t_last = now
        if now >= self.next_tick:
            self._run_clocks(now)

    def _run_clocks(self, now: float) -> None:
        clock = self._clock
        self.next_tick = clock[0](now) if len(clock) == 1 else min(cb(now) for cb in clock)

    def close_levels(self, end: float) -> None:
        """Integrate every level (cluster and per VC) up to ``end``."""
        if end > self.t_last:
            self.busy_area += self.busy_gpus * (end - self.t_last)
            self.powered_area += self.powered_gpus * (end - self.t_last)
            self.t_last = end
        for vc in self.vcs:
            if end > vc.t_last:
                vc.area += vc.busy * (end - vc.t_last)
                vc.t_last = end

    def _node_event(self, node: int, now: float) -> None:
        if now != self.t_last or now >= self.next_tick:
            self.advance(now)
        for cb in self._on_node:
            cb(node, now)

    # -- queries ------------------------------------------------------------------------
    @property
    def starts(self) -> int:
        """Starts so far (each start, assumed or confirmed, borrowed or not, takes the next
        ``run_seq``): a caller compares it before and after a pass to see whether it started a job."""
        return self._run

    def vc_of(self, job: Job) -> VcState:
        try:
            return self.vcs[self.vc_index[job.vc]]
        except KeyError:
            raise StateError(f"job {job.job_id}: unknown VC {job.vc!r}") from None

    def is_open(self, node: int) -> bool:
        """New jobs may go to ``node``: powered, not cordoned, not removed."""
        return self.node_slot[node] >= 0

    def gpu_holders(self, node: int, gpu: int) -> list[Job]:
        """Jobs holding GPU ``gpu`` of ``node``."""
        bit = 1 << gpu
        return [j for j, m in self.node_holders[node].items() if m & bit]

    def gpu_pred_mem(self, node: int, gpu: int) -> float:
        """Predicted memory of the GPU's holders (what policies see). A holder without a
        prediction counts as the whole GPU: nothing may join it."""
        total = 0.0
        for job in self.gpu_holders(node, gpu):
            mem = job.pred_gpu_mem_mib
            total += mem if mem == mem else self.node_mem[node]
        return total

    def gpu_free_mem(self, node: int, gpu: int) -> float:
        """Memory left on the GPU by its holders' predictions (MiB)."""
        return self.node_mem[node] - self.gpu_pred_mem(node, gpu)

    @property
    def enqueued(self) -> int:
        """Jobs entered into a queue so far (submits and re-queues): with the queues' lengths and
        the policy passes run, it tells a reader whether a queue changed since it last looked."""
        return self._enq

    def room_mask(self, node: int) -> int:
        """GPUs of an open node that may take one more job: free ones plus shareable ones."""
        if self.node_slot[node] < 0:
            return 0
        return (~self.node_mask[node] & ((1 << self.node_gpus[node]) - 1)) | self.node_share[node]

    def co_runners(self, job: Job, scope: str = "node") -> list[Job]:
        """Running jobs that share a node (``scope="node"``) or a GPU (``"gpu"``) with ``job``."""
        seen: dict[Job, None] = {}
        for node, mask in job.placement or ():
            for other, m in self.node_holders[node].items():
                if other is not job and (scope == "node" or m & mask):
                    seen[other] = None
        return list(seen)

    def _stopping(self, job: Job, vc: VcState, now: float, why: StopReason, host: VcState | None = None) -> None:
        """Before a job releases its GPUs: integrate levels (of ``host``, the VC whose nodes it
        holds, when that is not its own), tell the observers."""
        if now != self.t_last or now >= self.next_tick:
            self.advance(now)
        h = vc if host is None else host
        h.area += h.busy * (now - h.t_last)
        h.t_last = now
        if self._on_stop:
            for cb in self._on_stop:
                cb(job, vc, now, why)

    # -- job transitions ------------------------------------------------------------------
    def submit(self, job: Job, now: float) -> VcState:
        if job.state is not _CREATED:
            raise StateError(f"job {job.job_id} submitted twice")
        vc = job.vc_state
        if vc is None or vc is not self.vcs[vc.vid]:  # not bound to this state yet
            vc = job.vc_state = self.vc_of(job)
        if self.jobs.setdefault(job.job_id, job) is not job:  # one dict operation: check and index
            raise StateError(f"job id {job.job_id!r} is already known (job ids must be unique)")
        if now >= self.next_tick:  # a submit changes no level: only a due clock callback matters
            self.advance(now)
        if self._on_submit:
            for cb in self._on_submit:
                cb(job, vc, now)
        job.state = _PENDING
        job.wait_since = now
        self._enq += 1
        job.enq_seq = self._enq
        vc.queue.push(job)
        vc.pending += 1
        self.n_pending += 1
        return vc

    def start(self, job: Job, placement, now: float, shared: bool = False, confirm: bool = True) -> VcState:
        """Assume ``job`` runs on ``placement`` from ``now`` (and confirm it unless told not to)."""
        if job.state is not _PENDING:
            raise StateError(f"job {job.job_id} started while {job.state.name}")
        vc = job.vc_state
        if now != self.t_last:  # advance(now), inlined: the hottest path
            dt = now - self.t_last
            self.busy_area += self.busy_gpus * dt
            self.powered_area += self.powered_gpus * dt
            self.t_last = now
        if now >= self.next_tick:
            self._run_clocks(now)
        vc.area += vc.busy * (now - vc.t_last)
        vc.t_last = now
        if self._on_start:
            for cb in self._on_start:
                cb(job, vc, now)
        if len(placement) == EXCLUSIVE_SHORTCUT_NODES and not shared:
            # common case, inlined: one node, exclusive GPUs
            node, mask = placement[0]
            used = self.node_mask[node]
            if self.node_slot[node] != vc.vid or used & mask or mask >> self.node_gpus[node] or not mask:
                self._allocate(job, vc, placement, shared)  # raises with the precise reason
            n = mask.bit_count()
            old = self.node_free[node]
            local = 1 << self.node_local[node]
            buckets = vc.buckets
            buckets[old] &= ~local
            buckets[old - n] |= local
            self.node_free[node] = old - n
            self.node_mask[node] = used | mask
            self.node_holders[node][job] = mask
            if self.cap > 1:
                counts = self.gpu_count[node]
                for g in bit_tuple(mask):
                    counts[g] = 1
                self._update_share(node, vc)
            vc.free -= n
            vc.busy += n
            self.busy_gpus += n
        else:
            self._allocate(job, vc, placement, shared)
        vc.queue.remove(job)
        vc.pending -= 1
        vc.running[job] = None
        self.n_pending -= 1
        self.n_running += 1
        job.state = _RUNNING if confirm else _ASSUMED
        job.placement = placement
        if job.start_time < 0:
            job.start_time = now
        if now != job.wait_since:  # a job that did not wait keeps the shared 0.0 (24 B a job at 3.4 M)
            job.queue_delay += now - job.wait_since
        job.run_since = now
        self._run += 1
        job.run_seq = self._run
        return vc

    def start_borrowed(self, job: Job, host: VcState, placement, now: float, confirm: bool = True) -> VcState:
        """Start ``job`` on idle GPUs of another VC, ``host``, that lends them (queues with
        quotas). The job stays in its own VC's running set; the GPUs are booked to ``host``'s
        nodes until the job stops, when :meth:`finish`, :meth:`preempt`, :meth:`fail` or (an
        assumed start, ``confirm=False``: live, until the bind succeeds) :meth:`forget` release
        them there. Exclusive GPUs only. Returns the job's own VC."""
        if job.state is not _PENDING:
            raise StateError(f"job {job.job_id} started while {job.state.name}")
        if self.cap != 1:
            raise StateError("borrowing GPUs of another VC needs exclusive GPUs (max_jobs_per_gpu = 1)")
        vc = job.vc_state
        if host is vc:
            raise StateError(f"job {job.job_id}: a job does not borrow from its own VC {vc.name}")
        self.advance(now)
        host.area += host.busy * (now - host.t_last)
        host.t_last = now
        self._allocate(job, host, placement, False)  # validates against the lender's nodes
        self.hosts[job] = host
        if self._on_start:
            for cb in self._on_start:
                cb(job, vc, now)
        vc.queue.remove(job)
        vc.pending -= 1
        vc.running[job] = None
        self.n_pending -= 1
        self.n_running += 1
        job.state = _RUNNING if confirm else _ASSUMED
        job.placement = placement
        if job.start_time < 0:
            job.start_time = now
        if now != job.wait_since:  # a job that did not wait keeps the shared 0.0 (24 B a job at 3.4 M)
            job.queue_delay += now - job.wait_since
        job.run_since = now
        self._run += 1
        job.run_seq = self._run
        return vc

    def confirm(self, job: Job, now: float) -> None:
        """The backend carried out an assumed start (e.g. the pod was bound)."""
        if job.state is not _ASSUMED:
            raise StateError(f"job {job.job_id} confirmed while {job.state.name}")
        job.state = _RUNNING

    def forget(self, job: Job, now: float) -> VcState:
        """Undo an assumed start (the bind failed): release its GPUs and queue it again as if it
        had never started. No attempt is counted."""
        if job.state is not _ASSUMED:
            raise StateError(f"job {job.job_id} forgotten while {job.state.name} (only assumed starts)")
        vc = job.vc_state
        host = self.hosts.pop(job, vc) if self.hosts else vc
        self._stopping(job, vc, now, _WHY_FORGET, host)
        self._release(job, host)
        del vc.running[job]
        job.queue_delay -= job.run_since - job.wait_since  # the wait goes on
        if not job.preemptions and not job.failures:  # it had never really started
            job.start_time = -1.0
        job.run_since = -1.0
        job.epoch += 1
        job.state = _PENDING
        vc.queue.push(job)
        vc.pending += 1
        self.n_pending += 1
        self.n_running -= 1
        return vc

    def withdraw(self, job: Job, now: float) -> None:
        """A pending or finished job leaves the state for good (the live service: its pod was
        deleted). It holds no GPUs, so no level changes; its id may be used again."""
        if job.state is _PENDING:
            vc = job.vc_state
            vc.queue.remove(job)
            vc.pending -= 1
            self.n_pending -= 1
        elif job.state is not _FINISHED:
            raise StateError(f"job {job.job_id} withdrawn while {job.state.name} (forget or finish it first)")
        if self.jobs.get(job.job_id) is job:
            del self.jobs[job.job_id]
        self.terminated.pop(job, None)   # a long-lived service forgets its stops with the job
        job.state = _CREATED

    def finish(self, job: Job, now: float) -> VcState:
        """``job`` completed; returns its VC."""
        if job.state is not _RUNNING:
            raise StateError(f"job {job.job_id} finished while {job.state.name} (every job ends exactly once)")
        vc = job.vc_state
        host = self.hosts.pop(job, vc) if self.hosts else vc  # a borrowing job holds the lender's nodes
        if now != self.t_last:  # advance(now), inlined: the hottest path
            dt = now - self.t_last
            self.busy_area += self.busy_gpus * dt
            self.powered_area += self.powered_gpus * dt
            self.t_last = now
        if now >= self.next_tick:
            self._run_clocks(now)
        host.area += host.busy * (now - host.t_last)
        host.t_last = now
        if self._on_stop:
            for cb in self._on_stop:
                cb(job, vc, now, _WHY_FINISH)
        placement = job.placement
        node, mask = placement[0]
        if len(placement) == EXCLUSIVE_SHORTCUT_NODES and self.node_slot[node] >= 0 and self.cap == 1:
            n = mask.bit_count()
            old = self.node_free[node]
            local = 1 << self.node_local[node]
            buckets = host.buckets
            buckets[old] &= ~local
            buckets[old + n] |= local
            self.node_free[node] = old + n
            self.node_mask[node] &= ~mask
            del self.node_holders[node][job]
            job.placement = None
            host.free += n
            host.busy -= n
            self.busy_gpus -= n
        else:
            self._release(job, host)
        del vc.running[job]
        self.n_running -= 1
        job.state = _FINISHED
        job.end_time = now
        job.enq_seq = job.run_seq = 0  # a finished job's counters order nothing: 64 B a job back
        self.finished += 1
        return vc

    def terminate(self, job: Job, now: float, why: StopReason) -> VcState:
        """End a running ``job`` for good before it completed (``why``: its max runtime): its GPUs
        are released as at a finish and its run record ends ``now``; it counts as finished (it
        will not run again) and ``terminated`` keeps why. Returns its VC."""
        if job.state is not _RUNNING:
            raise StateError(f"job {job.job_id} terminated while {job.state.name}")
        vc = job.vc_state
        host = self.hosts.pop(job, vc) if self.hosts else vc
        self._stopping(job, vc, now, why, host)
        self._release(job, host)
        del vc.running[job]
        self.n_running -= 1
        job.state = _FINISHED
        job.end_time = now
        self.finished += 1
        self.terminated[job] = why
        return vc

    def preempt(self, job: Job, now: float) -> VcState:
        """Stop ``job`` (its checkpoint is the backend's business); it queues again. Returns
        its VC."""
        if job.state is not _RUNNING:
            raise StateError(f"job {job.job_id} preempted while {job.state.name}")
        vc = job.vc_state
        job.attained += job.gpus * (now - job.run_since)
        host = self.hosts.pop(job, vc) if self.hosts else vc
        self._stopping(job, vc, now, _WHY_PREEMPT, host)
        self._stop(job, vc, now, host)
        job.preemptions += 1
        return vc

    def fail(self, job: Job, now: float, reason: str) -> VcState:
        """``job`` crashed (e.g. out of memory): its GPUs are freed and it queues again with the
        attempt counted. Returns its VC."""
        if job.state is not _RUNNING and job.state is not _ASSUMED:
            raise StateError(f"job {job.job_id} failed while {job.state.name}")
        vc = job.vc_state
        if job.state is _RUNNING:
            job.attained += job.gpus * (now - job.run_since)
        host = self.hosts.pop(job, vc) if self.hosts else vc
        self._stopping(job, vc, now, _WHY_FAIL, host)
        self._stop(job, vc, now, host)
        job.failures += 1
        job.last_failure = reason
        self.failed += 1
        return vc

    def _stop(self, job: Job, vc: VcState, now: float, host: VcState) -> None:
        self._release(job, host)
        del vc.running[job]
        job.state = _PENDING
        job.wait_since = now
        job.epoch += 1
        self._enq += 1
        job.enq_seq = self._enq
        vc.queue.push(job)
        vc.pending += 1
        self.n_pending += 1
        self.n_running -= 1

    # -- nodes --------------------------------------------------------------------------
    def _new_vc(self, name: str) -> VcState:
        vc = VcState(name, len(self.vcs))
        if self.new_queue is not None:
            vc.queue = self.new_queue()
        self.vcs.append(vc)
        self.vc_index[name] = vc.vid
        return vc

    def add_node(self, spec: NodeSpec, now: float = 0.0) -> int:
        """A node joins (its VC is created if new); returns its global index."""
        node = self._add_node(spec, now)
        self._refresh_homogeneous(self.vcs[self.node_vc[node]])
        return node

    def _add_node(self, spec: NodeSpec, now: float) -> int:
        if spec.node_id in self.node_index:
            raise StateError(f"node {spec.node_id} is already in the cluster")
        if spec.gpus < 0:
            raise StateError(f"node {spec.node_id}: negative GPU count")
        vid = self.vc_index.get(spec.vc)
        vc = self.vcs[vid] if vid is not None else self._new_vc(spec.vc)
        node = len(self.node_ids)
        self._node_event(node, now)
        self.node_specs.append(spec)
        self.node_ids.append(spec.node_id)
        self.node_index[spec.node_id] = node
        self.node_gpus.append(spec.gpus)
        self.node_free.append(spec.gpus)
        self.node_mask.append(0)
        self.node_holders.append({})
        self.node_vc.append(vc.vid)
        self.node_local.append(len(vc.nodes))
        self.node_powered.append(True)
        self.node_cordoned.append(False)
        self.node_removed.append(False)
        self.node_slot.append(vc.vid)
        self.node_mem.append(float(spec.gpu_type.memory_mib))
        self.node_share.append(0)
        self.gpu_count.append([0] * spec.gpus)
        vc.nodes.append(node)
        if spec.gpus > vc.max_node_gpus:
            vc.buckets.extend([0] * (spec.gpus - vc.max_node_gpus))
            vc.max_node_gpus = spec.gpus
        vc.buckets[spec.gpus] |= 1 << self.node_local[node]
        vc.total_gpus += spec.gpus
        vc.free += spec.gpus
        self.total_gpus += spec.gpus
        self.powered_gpus += spec.gpus
        self.powered_count += 1
        return node

    def remove_node(self, node: int, now: float = 0.0) -> None:
        """A node leaves. It must hold no jobs (fail or preempt them first)."""
        if self.node_removed[node]:
            raise StateError(f"node {self.node_ids[node]} was already removed")
        if self.node_holders[node]:
            raise StateError(f"node {self.node_ids[node]} still runs {len(self.node_holders[node])} jobs")
        self._node_event(node, now)
        vc = self.vcs[self.node_vc[node]]
        self._close(node, vc)
        self.node_removed[node] = True
        g = self.node_gpus[node]
        vc.total_gpus -= g
        self.total_gpus -= g
        if self.node_powered[node]:
            self.powered_gpus -= g
            self.powered_count -= 1
            self.node_powered[node] = False
        del self.node_index[self.node_ids[node]]
        self._refresh_homogeneous(vc)

    def set_gpu_type(self, node: int, gpu_type: GpuType, now: float = 0.0) -> None:
        """The GPUs of ``node`` are of ``gpu_type`` (a type or memory label that arrived or was
        corrected after the node joined), even while it holds jobs: they keep their GPUs, and every
        later placement and sharing check reads the new memory per GPU. Why in place: a node's
        labels often come after it joined (GPU feature discovery), and a busy node may never be
        idle long enough to be removed and added again; until then the old figure would let
        co-located jobs overfill it."""
        if self.node_removed[node]:
            raise StateError(f"node {self.node_ids[node]} was removed")
        spec = self.node_specs[node]
        if spec.gpu_type == gpu_type:
            return
        self._node_event(node, now)   # observers (the load index, room gains) re-read the node
        self.node_specs[node] = replace(spec, gpu_type=gpu_type)
        self.node_mem[node] = float(gpu_type.memory_mib)
        self._refresh_homogeneous(self.vcs[self.node_vc[node]])

    def cordon(self, node: int, now: float = 0.0) -> None:
        """No new jobs on ``node``; running ones go on."""
        if self.node_removed[node]:
            raise StateError(f"node {self.node_ids[node]} was removed")
        if self.node_cordoned[node]:
            return
        self._node_event(node, now)
        self._close(node, self.vcs[self.node_vc[node]])
        self.node_cordoned[node] = True

    def uncordon(self, node: int, now: float = 0.0) -> None:
        if not self.node_cordoned[node]:
            return
        self._node_event(node, now)
        self.node_cordoned[node] = False
        self._reopen(node)

    def power_off(self, node: int, now: float = 0.0) -> None:
        """Power a node off: only an idle, powered node may be switched off."""
        if not self.node_powered[node]:
            raise StateError(f"node {self.node_ids[node]} is already off")
        if self.node_mask[node]:
            raise StateError(f"node {self.node_ids[node]} is busy and cannot be powered off")
        self._node_event(node, now)
        self._close(node, self.vcs[self.node_vc[node]])
        self.node_powered[node] = False
        self.powered_gpus -= self.node_gpus[node]
        self.powered_count -= 1

    def power_on(self, node: int, now: float = 0.0) -> None:
        if self.node_powered[node]:
            raise StateError(f"node {self.node_ids[node]} is already on")
        if self.node_removed[node]:
            raise StateError(f"node {self.node_ids[node]} was removed")
        self._node_event(node, now)
        self.node_powered[node] = True
        self.powered_gpus += self.node_gpus[node]
        self.powered_count += 1
        self._reopen(node)

    def _close(self, node: int, vc: VcState) -> None:
        """Take an open node out of placement (off, cordoned or removed)."""
        if self.node_slot[node] < 0:
            return
        local = 1 << self.node_local[node]
        vc.buckets[self.node_free[node]] &= ~local
        vc.share_nodes &= ~local
        vc.free -= self.node_free[node]
        self.node_free[node] = 0
        self.node_slot[node] = -1

    def _reopen(self, node: int) -> None:
        if self.node_slot[node] >= 0 or not self.node_powered[node] or self.node_cordoned[node] or self.node_removed[node]:
            return
        vc = self.vcs[self.node_vc[node]]
        free = self.node_gpus[node] - self.node_mask[node].bit_count()
        self.node_free[node] = free
        self.node_slot[node] = vc.vid
        vc.buckets[free] |= 1 << self.node_local[node]
        vc.free += free
        if self.node_share[node]:
            vc.share_nodes |= 1 << self.node_local[node]

    def _refresh_homogeneous(self, vc: VcState) -> None:
        present = [n for n in vc.nodes if not self.node_removed[n]]
        gpus = [self.node_gpus[n] for n in present]
        vc.gpus_per_node = gpus[0] if gpus and all(g == gpus[0] for g in gpus) else 0
        # nodes of one VC may differ in GPU memory: a job without a memory prediction counts as
        # the largest GPU, and sharing placements keep a job off GPUs smaller than its prediction
        levels: dict[float, list[int]] = {}   # memory -> [local bits, GPUs, GPUs of its largest node]
        for n in present:
            level = levels.setdefault(self.node_mem[n], [0, 0, 0])
            level[0] |= 1 << self.node_local[n]
            level[1] += self.node_gpus[n]
            level[2] = max(level[2], self.node_gpus[n])
        out, gpus, widest = [], 0, 0   # from the largest memory down: GPUs with at least this much
        for mem, (mask, count, big) in sorted(levels.items(), reverse=True):
            gpus, widest = gpus + count, max(widest, big)
            out.append((mem, mask, gpus, widest))
        vc.mem_levels = tuple(reversed(out))
        vc.min_gpu_mem = vc.mem_levels[0][0] if out else 0.0
        vc.max_gpu_mem = vc.mem_levels[-1][0] if out else 0.0

    # -- allocation bookkeeping -----------------------------------------------------------
    def _update_share(self, node: int, vc: VcState) -> None:
        counts, cap = self.gpu_count[node], self.cap
        share = 0
        for g in bit_tuple(self.node_mask[node]):
            if counts[g] < cap:
                share |= 1 << g
        self.node_share[node] = share
        local = 1 << self.node_local[node]
        if share and self.node_slot[node] >= 0:
            vc.share_nodes |= local
        else:
            vc.share_nodes &= ~local

    def _allocate(self, job: Job, vc: VcState, placement, shared: bool) -> None:
        node_free, node_mask, buckets = self.node_free, self.node_mask, vc.buckets
        if not placement:
            raise StateError(f"job {job.job_id}: empty placement")
        seen: set[int] = set()
        for node, mask in placement:  # validate everything before changing anything
            if node < 0 or node >= len(self.node_ids) or self.node_removed[node]:
                raise StateError(f"job {job.job_id}: node index {node} is not in the cluster")
            if node in seen:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} appears twice in the placement")
            seen.add(node)
            if self.node_vc[node] != vc.vid:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} is not in VC {vc.name}")
            if not self.node_powered[node]:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} is powered off")
            if self.node_cordoned[node]:
                raise StateError(f"job {job.job_id}: node {self.node_ids[node]} is cordoned")
            if not mask or mask >> self.node_gpus[node] or mask < 0:
                raise StateError(f"job {job.job_id}: GPU mask {mask:#x} does not fit node {self.node_ids[node]}")
            overlap = node_mask[node] & mask
            if overlap and not shared:
                raise StateError(f"job {job.job_id}: GPUs {set_bits(overlap)} of node {self.node_ids[node]} "
                                 "are already held (double booking)")
            if overlap:
                if self.cap == 1:
                    raise StateError(f"job {job.job_id}: GPUs {set_bits(overlap)} of node {self.node_ids[node]} "
                                     "are held and GPU sharing is off (max_jobs_per_gpu = 1)")
                counts = self.gpu_count[node]
                full = [g for g in set_bits(overlap) if counts[g] >= self.cap]
                if full:
                    raise StateError(f"job {job.job_id}: GPUs {full} of node {self.node_ids[node]} already hold "
                                     f"{self.cap} jobs (max_jobs_per_gpu)")
        taken = 0
        for node, mask in placement:
            new = mask & ~node_mask[node]
            if new:
                n_new = new.bit_count()
                old = node_free[node]
                local = 1 << self.node_local[node]
                buckets[old] &= ~local
                buckets[old - n_new] |= local
                node_free[node] = old - n_new
                node_mask[node] |= new
                taken += n_new
            self.node_holders[node][job] = mask
            if self.cap > 1:
                counts = self.gpu_count[node]
                for g in bit_tuple(mask):
                    counts[g] += 1
                self._update_share(node, vc)
        vc.free -= taken
        vc.busy += taken
        self.busy_gpus += taken

    def _release(self, job: Job, vc: VcState) -> None:
        node_free, node_mask, buckets = self.node_free, self.node_mask, vc.buckets
        freed = 0
        for node, mask in job.placement:
            gone = mask
            if self.cap > 1:
                counts = self.gpu_count[node]
                for g in bit_tuple(mask):
                    counts[g] -= 1
                    if counts[g]:
                        gone &= ~(1 << g)
            if gone:
                n = gone.bit_count()
                node_mask[node] &= ~gone
                if self.node_slot[node] >= 0:
                    old = node_free[node]
                    local = 1 << self.node_local[node]
                    buckets[old] &= ~local
                    buckets[old + n] |= local
                    node_free[node] = old + n
                    vc.free += n
                freed += n
            del self.node_holders[node][job]
            if self.cap > 1:
                self._update_share(node, vc)
        job.placement = None
        vc.busy -= freed
        self.busy_gpus -= freed

    @contextmanager
    def as_if(self, closed: Iterable[int] = (), released: Iterable[Job] = ()) -> Iterator[None]:
        """A placement question about a state that is not (yet) the real one, answered on the
        real books and restored exactly afterwards: the open nodes of ``closed`` taken out of
        placement, the GPUs of the running jobs ``released`` counted free. The queue manager
        asks it live, where a reclaimed job keeps its GPUs until its pod is gone (would the
        lender's head fit once the evictions in flight are done?) and where a per-type loan
        limit leaves only some of a lender's nodes. No observer hears of it, no level is
        integrated, the jobs' holder lists are untouched. Releasing jobs needs exclusive GPUs
        (borrowing's rule); closing nodes does not (the live rule of kube-scheduler's offered
        nodes asks it with shared GPUs too)."""
        released = tuple(released)
        if released and self.cap != 1:
            raise StateError("as_if needs exclusive GPUs (max_jobs_per_gpu = 1) to release jobs")
        shut = [n for n in closed if self.node_slot[n] >= 0]
        lifted = [(job, self.hosts.get(job, job.vc_state)) for job in released]
        node_free, node_mask, node_slot = self.node_free, self.node_mask, self.node_slot
        for job, host in lifted:
            for node, mask in job.placement:
                n = mask.bit_count()
                node_mask[node] &= ~mask
                if node_slot[node] >= 0:
                    local = 1 << self.node_local[node]
                    old = node_free[node]
                    host.buckets[old] &= ~local
                    host.buckets[old + n] |= local
                    node_free[node] = old + n
                    host.free += n
        for node in shut:
            self._close(node, self.vcs[self.node_vc[node]])
        try:
            yield
        finally:
            for node in reversed(shut):
                if node_slot[node] >= 0:
                    continue   # reopened meanwhile (a node uncordoned while the question was asked)
                node_slot[node] = self.node_vc[node]   # as _reopen: free recomputed from the mask
                vc = self.vcs[self.node_vc[node]]
                free = self.node_gpus[node] - node_mask[node].bit_count()
                node_free[node] = free
                vc.buckets[free] |= 1 << self.node_local[node]
                vc.free += free
                if self.node_share[node]:
                    vc.share_nodes |= 1 << self.node_local[node]
            for job, host in reversed(lifted):
                for node, mask in job.placement:
                    n = mask.bit_count()
                    node_mask[node] |= mask
                    if node_slot[node] >= 0:
                        local = 1 << self.node_local[node]
                        old = node_free[node]
                        host.buckets[old] &= ~local
                        host.buckets[old - n] |= local
                        node_free[node] = old - n
                        host.free -= n

    # -- self-check ---------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Recompute everything from the running jobs and compare (used in tests)."""
        counts: dict[tuple[int, int], int] = {}
        holders: list[dict] = [{} for _ in self.node_ids]
        for vc in self.vcs:
            for job in vc.running:
                if job.state is not _RUNNING and job.state is not _ASSUMED:
                    raise StateError(f"job {job.job_id} listed as running while {job.state.name}")
                if self.jobs.get(job.job_id) is not job:
                    raise StateError(f"job {job.job_id} runs but is not in the job index")
                for node, mask in job.placement:
                    holders[node][job] = mask
                    for g in set_bits(mask):
                        counts[(node, g)] = counts.get((node, g), 0) + 1
        for (node, g), n in counts.items():
            if n > self.cap:
                raise StateError(f"GPU {g} of node {self.node_ids[node]} holds {n} jobs; the cap is {self.cap}")
            if self.cap > 1 and self.gpu_count[node][g] != n:
                raise StateError(f"GPU {g} of node {self.node_ids[node]}: {n} holders, books say "
                                 f"{self.gpu_count[node][g]}")
        if sum(vc.pending for vc in self.vcs) != self.n_pending or \
                sum(len(vc.running) for vc in self.vcs) != self.n_running:
            raise StateError("job counters out of sync with the VCs")
        for job, host in self.hosts.items():
            if (job.state is not _RUNNING and job.state is not _ASSUMED) or job not in job.vc_state.running:
                raise StateError(f"job {job.job_id} listed as borrowing while {job.state.name}")
            if any(self.node_vc[node] != host.vid for node, _ in job.placement):
                raise StateError(f"job {job.job_id} borrows from VC {host.name} but holds other nodes")
        busy = 0
        for node in range(len(self.node_gpus)):
            if holders[node] != self.node_holders[node]:
                raise StateError(f"node {self.node_ids[node]}: holder list out of sync")
            mask = 0
            for m in holders[node].values():
                mask |= m
            if mask != self.node_mask[node]:
                raise StateError(f"node {self.node_ids[node]}: GPU mask out of sync")
            is_open = self.node_powered[node] and not self.node_cordoned[node] and not self.node_removed[node]
            if self.node_slot[node] != (self.node_vc[node] if is_open else -1):
                raise StateError(f"node {self.node_ids[node]}: open flag out of sync")
            expect = (self.node_gpus[node] - mask.bit_count()) if is_open else 0
            if self.node_free[node] != expect:
                raise StateError(f"node {self.node_ids[node]}: free {self.node_free[node]} != {expect}")
            if self.cap > 1:
                share = sum(1 << g for g in set_bits(mask) if counts.get((node, g), 0) < self.cap)
                if share != self.node_share[node]:
                    raise StateError(f"node {self.node_ids[node]}: shareable-GPU mask out of sync")
            busy += mask.bit_count()
        if busy != self.busy_gpus:
            raise StateError(f"busy GPUs {self.busy_gpus} != recomputed {busy}")
        for vc in self.vcs:
            free = sum(self.node_free[n] for n in vc.nodes)
            if free != vc.free:
                raise StateError(f"VC {vc.name}: free {vc.free} != recomputed {free}")
            vc_busy = sum(self.node_mask[n].bit_count() for n in vc.nodes)
            if vc_busy != vc.busy:
                raise StateError(f"VC {vc.name}: busy {vc.busy} != recomputed {vc_busy}")
            if vc.queue is not None and len(vc.queue) != vc.pending:
                raise StateError(f"VC {vc.name}: {len(vc.queue)} queued but pending says {vc.pending}")
            for k, bucket in enumerate(vc.buckets):
                for local in set_bits(bucket):
                    node = vc.nodes[local]
                    if self.node_slot[node] < 0 or self.node_free[node] != k:
                        raise StateError(f"VC {vc.name}: bucket {k} lists node {self.node_ids[node]} wrongly")
            for node in vc.nodes:
                if self.node_slot[node] >= 0 and not vc.buckets[self.node_free[node]] >> self.node_local[node] & 1:
                    raise StateError(f"VC {vc.name}: open node {self.node_ids[node]} missing from its bucket")
