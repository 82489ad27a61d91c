"""Topology-aware GPU placement (Amaral et al., SC17): the pure algorithms and their bridge to the kernel.

Algorithms: physical graph (``graph``), FM bisection (``fm``), DRB mapping (``drb``), the Eq. 2-5
utility (``utility``), job graphs and profiles (``jobgraph``), the pack/spread and interference
effects (``effects``) and the ``nvidia-smi topo -m`` parser (``smi``). Bridge to the kernel:
``profile`` (Job -> profile), ``machines`` (a graph per kernel node), ``index`` (incremental per-node records, a kernel observer) and ``mapping`` (the
cached per-node search). The placers are plug-ins of the main placement pipeline
(``dlsched.sched.placers.topo_aware``, ``socket_best_fit``, ``first_fit_node``), the speed model is
``dlsched.models.topology.TopologySpeed`` and the paper's workloads and experiments, which run on
the main engine, are :mod:`dlsched.experiments.topology`.
"""

from dlsched.topology.graph import MachineGraph, build_machine_graph, machine_graph
from dlsched.topology.jobgraph import JobProfile, comm_graph
from dlsched.topology.smi import TopoParseError, load_topo_file, parse_topo_matrix
from dlsched.topology.utility import utility

__all__ = [
    "JobProfile", "MachineGraph", "TopoParseError", "build_machine_graph", "comm_graph", "load_topo_file",
    "machine_graph", "parse_topo_matrix", "utility",
]
