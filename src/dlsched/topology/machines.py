"""The machine graph of every kernel node, indexed like the kernel's nodes.

Nodes that describe no topology get a preset, so topology placement and the topology speed model
work on any cluster: a DGX-1 for 8-GPU nodes (the most common 8-GPU board in the paper), a
dual-socket PCIe board otherwise. Identical topologies share one graph object, which the DRB and
utility caches key on.
"""

from __future__ import annotations

from functools import lru_cache

from dlsched.core.cluster import NodeSpec
from dlsched.core.topology import NodeTopology, preset_topology
from dlsched.topology.graph import MachineGraph, build_machine_graph


def default_topology(gpus: int) -> NodeTopology:
    """The topology assumed for a node that describes none."""
    return preset_topology("dgx1" if gpus == 8 else "pcie", gpus)


def node_topology(spec: NodeSpec) -> NodeTopology:
    return spec.topology if spec.topology is not None else default_topology(spec.gpus)


@lru_cache(maxsize=256)
def graph_of(topology: NodeTopology) -> MachineGraph:
    """One machine graph per distinct topology (equal topologies get the same object)."""
    return build_machine_graph(topology)


class NodeGraphs(list):
    """``graphs[node]`` is the :class:`MachineGraph` of kernel node ``node``; ``sync`` picks up
    nodes added since (the list is what :mod:`effects` and :mod:`utility` index by machine)."""

    def sync(self, specs: list[NodeSpec]) -> NodeGraphs:
        for spec in specs[len(self):]:
            self.append(graph_of(node_topology(spec)))
        return self
