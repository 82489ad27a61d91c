"""Vanilla DRS baseline: power a node off once it has been idle for a fixed time.

This is what Slurm's power saving does (``SuspendTime``): no forecast, no buffer; a job that
finds too few powered-on nodes resumes exactly the missing ones and waits for them to boot.
Nodes are counted, not named: idle nodes form a stack of idle-since times and a new job takes
the most recently idled ones (the warm ones), so the long-idle ones are those that time out.
"""

from __future__ import annotations

from dlsched.energy.actions import Action, BootTracker, ControllerStats, PowerOff, PowerOn


class VanillaDRSController:
    """Idle-timeout power saving; same stimuli and actions as :class:`CESController`."""

    def __init__(self, total_nodes: int, idle_timeout: float = 1800.0, boot_delay: float = 300.0) -> None:
        if total_nodes < 1 or idle_timeout < 0 or boot_delay < 0:
            raise ValueError("total_nodes must be >= 1, idle_timeout and boot_delay >= 0")
        self.total_nodes = total_nodes
        self.idle_timeout = idle_timeout
        self.boot_delay = boot_delay
        self.stats = ControllerStats()
        self.powered_on = total_nodes
        self.running = 0
        self._boots = BootTracker()
        self._idle_since: list[float] = []  # oldest first; one entry per idle powered-on node

    def start(self, time: float, running_nodes: int) -> list[Action]:
        """All nodes on; the idle ones start their idle clock now."""
        self.running = running_nodes
        self._idle_since = [time] * max(0, self.powered_on - running_nodes)
        return []

    def job_arrival(self, time: float, needed_nodes: int, available_nodes: int | None = None) -> list[Action]:
        """Resume exactly the nodes the job lacks (Slurm ResumeProgram semantics)."""
        free = self.powered_on - self.running if available_nodes is None else available_nodes
        return self._wake(time, needed_nodes - free) if needed_nodes > free else []

    def observe(self, time: float, running_nodes: int) -> list[Action]:
        """Update idle clocks and power off nodes idle for ``idle_timeout`` or longer."""
        self.running = running_nodes
        actions = self._wake(time, running_nodes - self.powered_on) if running_nodes > self.powered_on else []
        idle = self.powered_on - running_nodes - self._boots.booting(time)
        if idle > len(self._idle_since):
            self._idle_since.extend([time] * (idle - len(self._idle_since)))
        elif idle < len(self._idle_since):
            del self._idle_since[max(idle, 0):]
        expired = sum(1 for t in self._idle_since if time - t >= self.idle_timeout)
        if expired:
            del self._idle_since[:expired]
            self.powered_on -= expired
            action = PowerOff(time, expired)
            self.stats.record(action)
            actions.append(action)
        return actions

    def _wake(self, time: float, shortfall: int) -> list[Action]:
        n = min(self.total_nodes - self.powered_on, shortfall)
        if n <= 0:
            return []
        action = PowerOn(time, n, time + self.boot_delay)
        self.powered_on += n
        self._boots.add(action)
        self.stats.record(action)
        return [action]
