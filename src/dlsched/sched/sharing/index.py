"""Per-GPU load index for sharing placements: what every GPU of a VC carries, as arrays.

With ``max_jobs_per_gpu > 1`` a placement must look at the GPUs that already hold jobs: the
pipeline's room (predicted memory left, job cap) and cost scorers such as Horus's read the sum
of the holders' *predicted* utilisation and memory on each GPU. Recomputing those sums node by
node from ``node_holders`` for every job placed costs a scan of the whole VC per job (~10 ms on
128 x 8 GPUs). This index keeps them, per VC, as ``(nodes, GPUs)`` arrays and recomputes only
the rows of nodes that changed since the last look:

* it is a kernel observer: ``started`` / ``stopped`` / ``node_changed`` mark the nodes a
  transition touches (a started job's nodes are known only after the start, so they are marked
  at the next look, as :class:`~dlsched.metrics.delivered.DeliveredUtilisation` does);
* a prediction corrected while a job runs (:func:`dlsched.kernel.correction.observe`) reaches
  it as the observer hook ``predictions_changed(job)``: the job's nodes are re-read;
* a row is recomputed from the holders in holder order, exactly as
  :class:`~dlsched.sched.sharing.load.NodeLoad` and the pipeline's room sum them, so every
  float (and so every placement decision) equals the per-node scan's.

One index per :class:`~dlsched.kernel.state.ClusterState`, made by the driver for a placement
that declares ``"load"`` (every sharing pipeline does; :mod:`dlsched.sched.indexes`) and read as
``view.index("load")``; runs without sharing never make it.
"""

from __future__ import annotations

import numpy as np

from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState, VcState
from dlsched.sched.sharing.load import FULL_UTIL

_BYTE_BITS = ((np.arange(256)[:, None] >> np.arange(8)) & 1).astype(bool)  # byte -> its 8 bits


def mask_bits(mask: int, width: int) -> np.ndarray:
    """Bitmask -> boolean array of ``width`` (bit i -> element i)."""
    if width <= 8:
        return _BYTE_BITS[mask & 0xFF, :width]
    raw = np.frombuffer(mask.to_bytes((width + 7) // 8, "little"), dtype=np.uint8)
    return _BYTE_BITS[raw].reshape(-1)[:width]


def bits_mask(flags: np.ndarray) -> int:
    """Boolean array -> bitmask (element i -> bit i)."""
    return int.from_bytes(np.packbits(flags, bitorder="little").tobytes(), "little")


def mask_rows(mask: int, width: int) -> np.ndarray:
    """Indices of the set bits of ``mask`` (ascending), as an array."""
    return np.flatnonzero(mask_bits(mask, width))


class VcArrays:
    """One VC's per-GPU arrays (row = VC-local node index, column = GPU)."""

    __slots__ = ("util", "mem", "free_ok", "share_ok", "node_free", "cap", "rows")

    def __init__(self, rows: int, gpus: int) -> None:
        self.rows = rows
        self.util = np.zeros((rows, gpus))      # sum of the holders' predicted utilisation
        self.mem = np.zeros((rows, gpus))       # sum of the holders' predicted memory (MiB)
        self.free_ok = np.zeros((rows, gpus), dtype=bool)   # open node, GPU holds no job
        self.share_ok = np.zeros((rows, gpus), dtype=bool)  # open node, GPU below the job cap
        self.node_free = np.zeros(rows, dtype=np.int64)
        self.cap = np.zeros(rows)               # memory of each GPU of the node


class LoadIndex:
    """Predicted per-GPU load of every VC, recomputed lazily for the nodes that changed."""

    def __init__(self, state: ClusterState) -> None:
        self.state = state
        self.dirty: set[int] = set()
        self._new: list[Job] = []
        self._vcs: dict[int, VcArrays] = {}
        self._pending: dict[int, set[int]] = {}  # VC id -> its marked nodes, not yet re-read

    # -- observer callbacks (before the change) ---------------------------------------------
    def started(self, job: Job, vc, now: float) -> None:
        self._new.append(job)  # its placement is set by the start itself

    def stopped(self, job: Job, vc, now: float, why: str) -> None:
        for node, _ in job.placement or ():
            self.dirty.add(node)

    def node_changed(self, node: int, now: float) -> None:
        self.dirty.add(node)

    def predictions_changed(self, job: Job) -> None:
        """A running job's predicted utilisation or memory was corrected: re-read its nodes."""
        for node, _ in job.placement or ():
            self.dirty.add(node)

    # -- reading ------------------------------------------------------------------------------
    def arrays(self, vc: VcState) -> VcArrays:
        """The VC's arrays, brought up to date."""
        if self._new:
            for job in self._new:
                for node, _ in job.placement or ():
                    self.dirty.add(node)
            self._new.clear()
        state = self.state
        arr = self._vcs.get(vc.vid)
        if arr is None or arr.rows != len(vc.nodes) or arr.util.shape[1] != vc.max_node_gpus:
            arr = self._vcs[vc.vid] = VcArrays(len(vc.nodes), vc.max_node_gpus)
            for node in vc.nodes:
                self._row(arr, node)
            self.dirty.difference_update(vc.nodes)
            self._pending.pop(vc.vid, None)
            return arr
        if self.dirty:  # sort the marks by VC once; other VCs' rows wait for their next look
            node_vc, n_nodes, pend = state.node_vc, len(state.node_vc), self._pending
            for node in self.dirty:
                if node < n_nodes:
                    pend.setdefault(node_vc[node], set()).add(node)
            self.dirty.clear()
        rows = self._pending.pop(vc.vid, None)
        if rows:
            for node in rows:
                self._row(arr, node)
        return arr

    def _row(self, arr: VcArrays, node: int) -> None:
        state = self.state
        r = state.node_local[node]
        n = state.node_gpus[node]
        cap = state.node_mem[node]
        util = [0.0] * n
        mem = [0.0] * n
        for job, mask in state.node_holders[node].items():
            u = job.pred_gpu_util
            u = u if u == u else FULL_UTIL
            m = job.pred_gpu_mem_mib
            m = m if m == m else cap
            while mask:
                low = mask & -mask
                g = low.bit_length() - 1
                util[g] += u
                mem[g] += m
                mask ^= low
        arr.util[r, :n] = util
        arr.mem[r, :n] = mem
        if n < arr.util.shape[1]:
            arr.util[r, n:] = 0.0
            arr.mem[r, n:] = 0.0
        arr.cap[r] = cap
        width = arr.free_ok.shape[1]
        if state.node_slot[node] >= 0:
            busy = state.node_mask[node]
            arr.free_ok[r] = mask_bits(~busy & ((1 << n) - 1), width)
            arr.share_ok[r] = mask_bits(state.node_share[node] if state.cap > 1 else 0, width)
        else:
            arr.free_ok[r] = False
            arr.share_ok[r] = False
        arr.node_free[r] = state.node_free[node]

    def room_counts(self, vc: VcState, job: Job) -> tuple[VcArrays, np.ndarray, np.ndarray]:
        """Per VC-local node: the pipeline's room for ``job`` (free GPUs, plus shared GPUs below
        the cap whose memory left by the holders' predictions fits the job's predicted memory;
        none for a job without a memory prediction) as a boolean array, and its count."""
        arr = self.arrays(vc)
        mem = job.pred_gpu_mem_mib
        if mem != mem:
            room = arr.free_ok
        else:
            # the pipeline's test, float for float: a shared GPU is out when capacity - used < mem
            room = arr.free_ok | (arr.share_ok & ~((arr.cap[:, None] - arr.mem) < mem))
        return arr, room, room.sum(axis=1)
