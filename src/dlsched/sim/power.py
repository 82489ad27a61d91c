"""Cluster energy saving inside a simulation: the engine drives a power controller.

The controller (CES or vanilla idle-timeout, :mod:`dlsched.energy`) counts nodes; this
manager turns its actions into node events on the :class:`~dlsched.kernel.state.ClusterState`:
power-offs take idle powered nodes (from the VC with the most idle ones first, highest index
first, always leaving ``vc_reserve`` of each VC's nodes idle and on), wake-ups take powered-off nodes of the VC that needs them first, and woken nodes
join the cluster ``boot_delay`` later. A job that cannot start at submission because its VC
has nodes off or booting triggers the controller's JobArrivalCheck and is counted as waiting
for power (``jobs_waiting_for_power``).
"""

from __future__ import annotations

import math

from dlsched.core.job import Job
from dlsched.energy.actions import PowerOff
from dlsched.kernel.state import ClusterState


class PowerManager:
    """Adapter between the engine and a node-count power controller."""

    def __init__(self, controller, forecast=None, period: float = 600.0, vc_reserve: float = 0.05,
                 boot_delay: float | None = None) -> None:
        self.controller = controller
        self.boot_delay = boot_delay if boot_delay is not None else _controller_boot_delay(controller)
        self.vc_reserve = vc_reserve  # share of each VC's nodes kept powered and idle (at least 1)
        self.reserve: dict[int, int] = {}
        self.forecast = forecast      # an OnlineDemandForecast fed with busy nodes, or None
        self.period = period
        self.booting: dict[int, float] = {}   # node -> ready time
        self.waiting_jobs: set[Job] = set()
        self.wakeups = 0
        self.woken_nodes = 0

    # -- engine protocol --------------------------------------------------------------------
    def initial_events(self, state: ClusterState, jobs: list[Job]):
        # jobs only run in their own VC: each VC keeps a few spare nodes on, whatever the total says
        self.reserve = {vc.vid: max(1, math.ceil(self.vc_reserve * len(vc.nodes))) for vc in state.vcs}
        t0 = jobs[0].submit_time if jobs else 0.0
        return [(t0, "power-start", None)]

    def on_arrival(self, job: Job, state: ClusterState, now: float):
        vc = job.vc_state
        if job.gpus <= vc.free or not any(not state.node_powered[n] for n in vc.nodes):
            return []
        self.waiting_jobs.add(job)
        return self._arrival_check(job, state, now)

    def _arrival_check(self, job: Job, state: ClusterState, now: float) -> list[tuple]:
        """JobArrivalCheck for ``job``'s VC: wake what it lacks (the controller adds its buffer)."""
        vc = job.vc_state
        per = max(1, vc.max_node_gpus)
        needed = math.ceil(job.gpus / per)
        idle_here = sum(1 for n in vc.nodes if state.node_powered[n] and not state.node_mask[n])
        booting_here = sum(1 for n in self.booting if state.node_vc[n] == vc.vid)
        actions = self.controller.job_arrival(now, needed, idle_here + booting_here)
        events = self._carry_out(actions, state, now, prefer_vc=vc)
        if not any(state.node_vc[n] == vc.vid for n in self.booting):
            # the controller saw enough nodes cluster-wide, but this VC has none coming: wake its own
            nodes = self._pick_off_nodes(state, needed - idle_here, vc)
            nodes = [n for n in nodes if state.node_vc[n] == vc.vid]
            if nodes:
                self.controller.powered_on += len(nodes)
                events += self._boot(nodes, now + self.boot_delay)
        return events

    def apply(self, kind: str, payload, state: ClusterState, now: float):
        """Returns (VC ids that changed, follow-up events)."""
        if kind == "power-on":
            vids = set()
            for node in payload:
                if self.booting.get(node) == now:
                    del self.booting[node]
                    state.power_on(node, now)
                    vids.add(state.node_vc[node])
            return vids, []
        running = sum(1 for m in state.node_mask if m)
        if self.forecast is not None:
            self.forecast.record(now, running)
        if kind == "power-start":
            actions = self.controller.start(now, running)
        else:  # periodic check
            actions = self.controller.observe(now, running)
        events = self._carry_out(actions, state, now)
        # the controller counts nodes cluster-wide, but jobs only run in their own VC: a VC whose
        # queue head is blocked by powered-off nodes, with none booting, gets its arrival check again
        for vc in state.vcs:
            head = vc.queue.head() if vc.pending else None
            if (head is not None and head.gpus > vc.free
                    and not any(state.node_vc[n] == vc.vid for n in self.booting)
                    and any(not state.node_powered[n] for n in vc.nodes)):
                self.waiting_jobs.add(head)
                events += self._arrival_check(head, state, now)
        return set(), events + [(now + self.period, "power-check", None)]

    # -- actions -----------------------------------------------------------------------------
    def _carry_out(self, actions, state: ClusterState, now: float, prefer_vc=None) -> list[tuple]:
        events = []
        for action in actions:
            if isinstance(action, PowerOff):
                done = self._power_off(state, action.nodes, now)
                if done < action.nodes:  # fewer idle nodes than the controller counted
                    self.controller.powered_on += action.nodes - done
            else:
                nodes = self._pick_off_nodes(state, action.nodes, prefer_vc)
                if len(nodes) < action.nodes:
                    self.controller.powered_on -= action.nodes - len(nodes)
                if nodes:
                    events += self._boot(nodes, action.ready_at)
        return events

    def _boot(self, nodes: list[int], ready_at: float) -> list[tuple]:
        self.wakeups += 1
        self.woken_nodes += len(nodes)
        for node in nodes:
            self.booting[node] = ready_at
        return [(ready_at, "power-on", tuple(nodes))]

    def _power_off(self, state: ClusterState, count: int, now: float) -> int:
        idle: dict[int, list[int]] = {}
        for node, (on, mask) in enumerate(zip(state.node_powered, state.node_mask)):
            if on and not mask:
                idle.setdefault(state.node_vc[node], []).append(node)
        for vid in list(idle):
            keep = self.reserve.get(vid, 1)
            idle[vid] = idle[vid][keep:] if len(idle[vid]) > keep else []
            if not idle[vid]:
                del idle[vid]
        done = 0
        while done < count and idle:
            vid = max(idle, key=lambda v: (len(idle[v]), -v))
            state.power_off(idle[vid].pop(), now)
            if not idle[vid]:
                del idle[vid]
            done += 1
        return done

    def _pick_off_nodes(self, state: ClusterState, count: int, prefer_vc) -> list[int]:
        off = [n for n, on in enumerate(state.node_powered) if not on and n not in self.booting]
        if prefer_vc is not None:
            off.sort(key=lambda n: (state.node_vc[n] != prefer_vc.vid, n))
        return off[:count]

    def summary(self, recorder, energy_model=None) -> dict:
        """Powered-off nodes (time-weighted, from the recorder), wake-ups, jobs that waited for power."""
        state = recorder.state
        span = recorder.span
        gpus_per_node = state.total_gpus / max(1, len(state.node_gpus))
        off_gpu_seconds = state.total_gpus * span - recorder.powered_area
        off_node_hours = off_gpu_seconds / gpus_per_node / 3600.0
        waited = sum(1 for j in self.waiting_jobs if j.queue_delay > 0)
        days = span / 86400.0
        out = {
            "controller": type(self.controller).__name__,
            "avg_powered_off_nodes": off_node_hours * 3600.0 / span if span > 0 else 0.0,
            "wakeups": self.wakeups,
            "woken_nodes": self.woken_nodes,
            "daily_wakeups": self.wakeups / days if days > 0 else 0.0,
            "nodes_per_wakeup": self.woken_nodes / self.wakeups if self.wakeups else 0.0,
            "jobs_waiting_for_power": waited,
        }
        if energy_model is not None:
            out.update(energy_model.savings(off_node_hours, days))
        return out


def _controller_boot_delay(controller) -> float:
    params = getattr(controller, "params", None)
    return float(getattr(params, "boot_delay", getattr(controller, "boot_delay", 300.0)))
