"""Time-weighted levels, observed from the kernel's transitions.

The recorder is an observer of :class:`~dlsched.kernel.state.ClusterState`: every transition
tells it *before* occupancy changes, so it integrates busy and powered GPUs over time
(cluster-wide and per VC) exactly, counts running and queued jobs, and keeps a sampled
timeline (at most one row per ``interval`` seconds) for plots. Nothing in the event loop
computes metrics.
"""

from __future__ import annotations

from array import array

from dlsched.core.job import Job
from dlsched.kernel.state import ClusterState, VcState


class MetricsRecorder:
    __slots__ = ("state", "interval", "t0", "t_last", "busy_area", "vc_area", "vc_last", "next_row",
                 "rows_t", "rows_busy", "rows_running", "rows_queued", "rows_powered", "t_end",
                 "powered_area", "started_run", "running", "queued")

    def __init__(self, state: ClusterState, interval: float = 60.0) -> None:
        self.state = state
        self.interval = interval
        self.t0 = None
        self.t_last = 0.0
        self.t_end = 0.0
        self.busy_area = 0.0
        self.powered_area = 0.0
        self.vc_area = [0.0] * len(state.vcs)
        self.vc_last = [0.0] * len(state.vcs)
        self.next_row = -float("inf")
        self.rows_t = array("d")
        self.rows_busy = array("l")
        self.rows_running = array("l")
        self.rows_queued = array("l")
        self.rows_powered = array("l")
        self.started_run = False
        self.running = 0
        self.queued = 0

    def begin(self, t0: float) -> None:
        """Start integrating at ``t0`` (the first event time)."""
        self.started_run = True
        self.t0 = t0
        self.t_last = t0
        self.vc_area = [0.0] * len(self.state.vcs)
        self.vc_last = [t0] * len(self.state.vcs)

    def advance(self, now: float) -> None:
        """Integrate up to ``now`` (nothing changed since the last call) and sample a row."""
        if now != self.t_last:
            dt = now - self.t_last
            state = self.state
            self.busy_area += state.busy_gpus * dt
            self.powered_area += state.powered_gpus * dt
            self.t_last = now
        if now >= self.next_row:
            self.add_row(now)

    # -- observer protocol (called before the state changes) -----------------------------
    def submitted(self, job: Job, vc: VcState, now: float) -> None:
        if now != self.t_last:  # advance(now), inlined: observers run on every transition
            dt = now - self.t_last
            state = self.state
            self.busy_area += state.busy_gpus * dt
            self.powered_area += state.powered_gpus * dt
            self.t_last = now
        if now >= self.next_row:
            self.add_row(now)
        self.queued += 1

    def started(self, job: Job, vc: VcState, now: float) -> None:
        if now != self.t_last:  # advance(now), inlined: observers run on every transition
            dt = now - self.t_last
            state = self.state
            self.busy_area += state.busy_gpus * dt
            self.powered_area += state.powered_gpus * dt
            self.t_last = now
        if now >= self.next_row:
            self.add_row(now)
        vid = vc.vid
        self.vc_area[vid] += vc.busy * (now - self.vc_last[vid])
        self.vc_last[vid] = now
        self.running += 1
        self.queued -= 1

    def stopped(self, job: Job, vc: VcState, now: float, why: str) -> None:
        if now != self.t_last:  # advance(now), inlined: observers run on every transition
            dt = now - self.t_last
            state = self.state
            self.busy_area += state.busy_gpus * dt
            self.powered_area += state.powered_gpus * dt
            self.t_last = now
        if now >= self.next_row:
            self.add_row(now)
        vid = vc.vid
        self.vc_area[vid] += vc.busy * (now - self.vc_last[vid])
        self.vc_last[vid] = now
        self.running -= 1
        if why != "finish":
            self.queued += 1

    def node_changed(self, node: int, now: float) -> None:
        if self.started_run:
            self.advance(now)
            if len(self.vc_area) < len(self.state.vcs):  # a VC appeared with a new node
                grow = len(self.state.vcs) - len(self.vc_area)
                self.vc_area.extend([0.0] * grow)
                self.vc_last.extend([now] * grow)

    # -------------------------------------------------------------------------------------
    def add_row(self, now: float) -> None:
        self.rows_t.append(now)
        self.rows_busy.append(self.state.busy_gpus)
        self.rows_running.append(self.running)
        self.rows_queued.append(self.queued)
        self.rows_powered.append(self.state.powered_count)
        self.next_row = now + self.interval

    def close(self, end: float) -> None:
        if not self.started_run:
            self.t0 = 0.0
            return
        if end > self.t_last:
            self.busy_area += self.state.busy_gpus * (end - self.t_last)
            self.powered_area += self.state.powered_gpus * (end - self.t_last)
            self.t_last = end
        for vc in self.state.vcs:
            self.vc_area[vc.vid] += vc.busy * (end - self.vc_last[vc.vid])
            self.vc_last[vc.vid] = end
        self.t_end = end

    @property
    def span(self) -> float:
        return (self.t_end - self.t0) if self.t0 is not None else 0.0

    def gpu_utilization(self) -> float:
        """Time-weighted busy GPUs / all GPUs, from the first event to the last job end."""
        span = self.span
        return self.busy_area / (self.state.total_gpus * span) if span > 0 and self.state.total_gpus else 0.0

    def vc_utilization(self, vc: VcState) -> float:
        span = self.span
        return self.vc_area[vc.vid] / (vc.total_gpus * span) if span > 0 and vc.total_gpus else 0.0

    def timeline(self) -> dict[str, list]:
        return {
            "time": list(self.rows_t),
            "busy_gpus": list(self.rows_busy),
            "total_gpus": [self.state.total_gpus] * len(self.rows_t),
            "running_jobs": list(self.rows_running),
            "queued_jobs": list(self.rows_queued),
            "powered_nodes": list(self.rows_powered),
        }
