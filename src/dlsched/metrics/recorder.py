"""Time-weighted levels and the sampled timeline of one run.

The kernel integrates busy and powered GPUs (cluster-wide and per VC) at every transition — it is
the only place that sees every change, so the integrals are exact. The recorder is a clock
observer of the kernel: before the first transition at or after each sampling time it takes a
timeline row (at most one per ``interval`` seconds) for plots, and at the end it reads the
integrals. Nothing in the event loop computes metrics.
"""

from __future__ import annotations

from array import array
from typing import TYPE_CHECKING

from dlsched.kernel.state import ClusterState, VcState

if TYPE_CHECKING:
    import numpy as np


class MetricsRecorder:
    __slots__ = ("state", "interval", "t0", "t_end", "rows_t", "rows_busy", "rows_running", "rows_queued",
                 "rows_powered", "started_run")

    def __init__(self, state: ClusterState, interval: float = 60.0) -> None:
        self.state = state
        self.interval = interval
        self.t0 = None
        self.t_end = 0.0
        self.rows_t = array("d")
        # counts in 2 or 4 bytes (a 1M-job run samples ~1.8M rows). GPUs and nodes in 2 while the
        # cluster has < 16,384 GPUs: 4x headroom below 65,536 (the simulator adds no nodes mid-run)
        small = "H" if state.total_gpus < 1 << 14 else "i"
        self.rows_busy = array(small)
        self.rows_running = array("i")
        self.rows_queued = array("i")
        self.rows_powered = array(small)
        self.started_run = False
        state.add_clock(self.sample)

    def begin(self, t0: float) -> None:
        """Start integrating at ``t0`` (the first event time)."""
        self.started_run = True
        self.t0 = t0
        self.state.begin(t0)

    # -- counts read from the state ----------------------------------------------------
    @property
    def running(self) -> int:
        return self.state.n_running

    @property
    def queued(self) -> int:
        return self.state.n_pending

    def sample(self, now: float) -> float:
        """Clock callback: one timeline row at ``now`` (state as it was just before ``now``)."""
        state = self.state
        self.rows_t.append(now)
        self.rows_busy.append(state.busy_gpus)
        self.rows_running.append(state.n_running)
        self.rows_queued.append(state.n_pending)
        self.rows_powered.append(state.powered_count)
        return now + self.interval

    def close(self, end: float) -> None:
        if not self.started_run:
            self.t0 = 0.0
            return
        self.state.close_levels(end)
        self.t_end = end

    # -- integrals ---------------------------------------------------------------------
    @property
    def busy_area(self) -> float:
        return self.state.busy_area

    @property
    def powered_area(self) -> float:
        return self.state.powered_area

    @property
    def vc_area(self) -> list[float]:
        return [vc.area for vc in self.state.vcs]

    @property
    def span(self) -> float:
        return (self.t_end - self.t0) if self.t0 is not None else 0.0

    def gpu_utilization(self) -> float:
        """Time-weighted busy GPUs / all GPUs, from the first event to the last job end."""
        span = self.span
        total = self.state.total_gpus
        return self.state.busy_area / (total * span) if span > 0 and total else 0.0

    def vc_utilization(self, vc: VcState) -> float:
        span = self.span
        return vc.area / (vc.total_gpus * span) if span > 0 and vc.total_gpus else 0.0

    def timeline_arrays(self) -> dict[str, np.ndarray]:
        """:meth:`timeline` as numpy arrays (the sampled rows shared, not copied): what the writer
        formats."""
        import numpy as np

        times = np.frombuffer(self.rows_t, np.float64) if len(self.rows_t) else np.zeros(0)

        def ints(rows: array) -> np.ndarray:
            return np.frombuffer(rows, rows.typecode) if len(rows) else np.zeros(0, np.int64)

        return {
            "time": times,
            "busy_gpus": ints(self.rows_busy),
            "total_gpus": np.full(len(times), self.state.total_gpus, np.int64),
            "running_jobs": ints(self.rows_running),
            "queued_jobs": ints(self.rows_queued),
            "powered_nodes": ints(self.rows_powered),
        }

    def timeline(self) -> dict[str, list]:
        return {
            "time": list(self.rows_t),
            "busy_gpus": list(self.rows_busy),
            "total_gpus": [self.state.total_gpus] * len(self.rows_t),
            "running_jobs": list(self.rows_running),
            "queued_jobs": list(self.rows_queued),
            "powered_nodes": list(self.rows_powered),
        }
