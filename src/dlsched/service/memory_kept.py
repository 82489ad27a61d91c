"""What the node agents taught the service about GPU memory, kept across restarts.

A pod's predicted memory is its model's prediction (calibrated by the cluster's
:class:`~dlsched.predictors.resources.stack_calibration.StackCalibration`) until the agent's
readings correct it (after the warm-up, an OOM failover, a co-runner's OOM:
:mod:`~dlsched.service.readings`). Both lived in memory only: a restarted service, or a new
leader, predicted a pod from scratch again and could put it back beside the co-runner it ran out
of memory with. So the store keeps (``service/store.py``'s ``memory_corrections`` and
``memory_peaks``), keyed by pod uid, the key of the pod's kernel job:

* each corrected pod's predicted memory, re-applied when the restarted service makes the pod's
  job again (the kernel's correction rule, the fresh prediction kept as the prior);
* each peak the calibration counted (the raw and the given prediction, its key and the job's
  signature), restored into the calibration at start-up, so later pods are calibrated as before.

Only memory is kept: a utilisation reading moves every round and is read again after the
warm-up. Writes are made under the core's lock into a buffer and committed by :meth:`write`
once the caller let go of it (one transaction per agent post), only when a figure changed. A
correction goes with its pod's end (the store's release); the newest ``Store.memory_kept`` rows
of each table are kept, the oldest dropped and counted.
"""

from __future__ import annotations

import math
import threading
from collections import Counter, OrderedDict

from dlsched.core.job import Job
from dlsched.kernel.correction import observe
from dlsched.service.store import Store

DROPPED = "memory rows dropped from the store (the oldest past its limit)"
GONE = "memory corrections of pods gone while the service was down, dropped"


class MemoryKept:
    """Corrected memory and calibration peaks <-> the store, by pod uid."""

    def __init__(self, store: Store, predict, counters: Counter[str]) -> None:
        self.store = store
        self.calibration = getattr(predict, "calibration", None)
        self.counters = counters
        self.loaded: dict[str, tuple[float, float]] = {}   # uid -> (MiB, at): applied when its job is made
        self.written: OrderedDict[str, float] = OrderedDict()        # uid -> the MiB last kept
        self.peaks_written: OrderedDict[str, float] = OrderedDict()  # uid -> the peak last kept
        self._lock = threading.Lock()   # the buffers: filled under the core's lock, written outside it
        self._corrections: dict[str, dict] = {}
        self._peaks: dict[str, dict] = {}

    # -- start-up ---------------------------------------------------------------------------
    def load(self) -> tuple[int, int]:
        """Read the store (at start-up, or on becoming leader): the corrections wait for their
        pods' jobs, the peaks go into the calibration. Returns (corrections, peaks) read."""
        corrections, peaks = self.store.memory_rows()
        self.loaded = {r["pod_uid"]: (float(r["gpu_mem_mib"]), float(r["at"])) for r in corrections}
        self.written = OrderedDict((uid, mib) for uid, (mib, _) in self.loaded.items())
        self.peaks_written = OrderedDict((r["pod_uid"], float(r["peak_mib"])) for r in peaks)
        if self.calibration is not None and peaks:
            self.calibration.restore((r["pod_uid"], r["raw_mib"], r["cal_key"], r["signature"], r["given_mib"],
                                      r["peak_mib"]) for r in peaks)
        return len(corrections), len(peaks)

    def settle(self, known: set[str]) -> int:
        """After the start-up's listing: corrections of pods it did not show (gone while the
        service was down) go from the store. Returns how many."""
        gone = [uid for uid in self.loaded if uid not in known]
        for uid in gone:
            del self.loaded[uid]
            self.written.pop(uid, None)
        self.store.forget_memory(gone)
        self.counters[GONE] += len(gone)
        return len(gone)

    def apply(self, job: Job) -> None:
        """A pod's new job (a restart sees it again): its kept correction replaces the fresh
        prediction, as the agent's reading did (the prediction stays the prior)."""
        kept = self.loaded.pop(job.job_id, None)
        if kept is not None:
            observe(job, math.nan, kept[0], kept[1])
            self.counters["memory corrections restored from the store"] += 1

    # -- what the readings changed (under the core's lock) -------------------------------------
    def corrected(self, job: Job, pod: str, why: str, now: float) -> None:
        """``job``'s predicted memory may have been corrected (``why``: observe, oom, partner)."""
        mib = job.pred_gpu_mem_mib
        if job.observed_at < 0 or mib != mib or self.written.get(job.job_id) == mib:
            return
        _remember(self.written, job.job_id, mib, self.store.memory_kept)
        with self._lock:
            self._corrections[job.job_id] = {"pod_uid": job.job_id, "pod": pod, "gpu_mem_mib": mib, "why": why,
                                             "at": now}

    def peak(self, uid: str, mib: float, now: float) -> None:
        """A reading the calibration counted: kept when it is the pod's largest yet."""
        cal = self.calibration
        if cal is None or uid not in cal.pending or not mib > self.peaks_written.get(uid, 0.0):
            return
        raw, key, sig, given = cal.pending[uid]
        _remember(self.peaks_written, uid, mib, self.store.memory_kept)
        with self._lock:
            self._peaks[uid] = {"pod_uid": uid, "cal_key": key, "signature": sig, "raw_mib": raw,
                                "given_mib": given, "peak_mib": mib, "at": now}

    # -- the write (outside the core's lock) ------------------------------------------------------
    def write(self) -> int:
        """Commit what changed since the last write (one transaction); returns the rows written."""
        with self._lock:
            corrections, peaks = list(self._corrections.values()), list(self._peaks.values())
            self._corrections, self._peaks = {}, {}
        if not corrections and not peaks:
            return 0
        dropped = self.store.keep_memory(corrections, peaks)
        if dropped:
            self.counters[DROPPED] += dropped
        return len(corrections) + len(peaks)


def _remember(table: OrderedDict[str, float], uid: str, value: float, limit: int) -> None:
    """``uid``'s value, newest last; the table holds at most ``limit`` (the store's own bound)."""
    table[uid] = value
    table.move_to_end(uid)
    if len(table) > limit:
        table.popitem(last=False)
