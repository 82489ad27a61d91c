"""Topology-aware GPU placement (Amaral et al., SC17): physical graph, DRB/FM mapping, utility,
TOPO-AWARE / TOPO-AWARE-P and baselines, speed model and the paper's experiments.

Plug-in point for a simulator: build a :class:`ClusterState` (or keep one in sync with
``allocate``/``release``) and call ``make_placer("topo-aware-p").decide(state, profile)``.
"""

from dlsched.topology.graph import MachineGraph, build_machine_graph, machine_graph
from dlsched.topology.jobgraph import JobProfile, comm_graph
from dlsched.topology.placer import BestFitPlacer, Decision, FCFSPlacer, TopoAwarePlacer, make_placer
from dlsched.topology.smi import TopoParseError, load_topo_file, parse_topo_matrix
from dlsched.topology.state import ClusterState
from dlsched.topology.utility import utility

__all__ = [
    "BestFitPlacer", "ClusterState", "Decision", "FCFSPlacer", "JobProfile", "MachineGraph", "TopoAwarePlacer",
    "TopoParseError", "build_machine_graph", "comm_graph", "load_topo_file", "machine_graph", "make_placer",
    "parse_topo_matrix", "utility",
]
