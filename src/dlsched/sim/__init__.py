"""The simulated backend: the event loop (clock, heap, power manager) over the shared kernel."""

from dlsched.kernel.decisions import Postpone, Preempt, Start
from dlsched.sim.config import SimConfig
from dlsched.sim.engine import SimulationError, Simulator, simulate

__all__ = ["SimConfig", "Postpone", "Preempt", "Start", "SimulationError", "Simulator", "simulate"]
