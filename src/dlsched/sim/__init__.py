"""Event-driven simulator: one heap of events, one owner of cluster state, pluggable policies."""

from dlsched.sim.config import SimConfig
from dlsched.sim.decisions import Preempt, Start
from dlsched.sim.engine import SimulationError, Simulator, simulate

__all__ = ["SimConfig", "Preempt", "Start", "SimulationError", "Simulator", "simulate"]
