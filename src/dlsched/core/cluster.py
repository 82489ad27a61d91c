"""Static description of a cluster: node specs, GPU types, virtual clusters.

Runtime occupancy lives in ``dlsched.kernel.state.ClusterState`` (the one owner of state);
this module only says what hardware exists and who owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.core import gpus
from dlsched.core.topology import NodeTopology, preset_topology


@dataclass(frozen=True, slots=True)
class GpuType:
    """A GPU model and the figures the predictors and energy model need."""

    name: str = "V100"
    memory_mib: int = 32 * 1024
    idle_watts: float = 50.0
    max_watts: float = 300.0


# The one list of GPU types (dlsched.core.gpus): the simulator reads memory and power from it.
GPU_TYPES: dict[str, GpuType] = {g.name: GpuType(g.name, g.memory_mib, g.idle_watts, g.max_watts)
                                 for g in gpus.KNOWN}


def gpu_type(name: str) -> GpuType:
    """A known GPU type by name (case, spaces, '-' and '_' ignored)."""
    found = gpus.find(name)
    if found is None:
        raise ValueError(f"unknown GPU type {name!r}; choose from {', '.join(GPU_TYPES)}")
    return GPU_TYPES[found.name]


@dataclass(frozen=True, slots=True)
class NodeSpec:
    """One server. ``node_id`` is unique in the cluster; ``index`` is its position."""

    node_id: str
    vc: str
    gpus: int = 8
    gpu_type: GpuType = field(default_factory=GpuType)
    cpus: int = 64
    host_memory_gib: int = 512
    topology: NodeTopology | None = None
    idle_watts: float = 800.0


@dataclass(frozen=True, slots=True)
class VirtualCluster:
    """A virtual cluster (VC): a named set of nodes that only its own jobs may use."""

    name: str
    node_ids: tuple[str, ...]


@dataclass(slots=True)
class ClusterSpec:
    """All nodes and VCs. Build with :meth:`homogeneous` or :meth:`from_vc_sizes`."""

    nodes: list[NodeSpec]
    vcs: dict[str, VirtualCluster]

    @classmethod
    def from_vc_sizes(
        cls,
        vc_nodes: dict[str, int],
        gpus_per_node: int = 8,
        gpu_type: GpuType | None = None,
        cpus_per_node: int = 64,
        topology: str | None = None,
    ) -> ClusterSpec:
        """One homogeneous VC per entry of ``vc_nodes`` (VC name -> node count)."""
        if not vc_nodes:
            raise ValueError("a cluster needs at least one virtual cluster")
        gtype = gpu_type or GpuType()
        topo = preset_topology(topology, gpus_per_node) if topology else None
        nodes: list[NodeSpec] = []
        vcs: dict[str, VirtualCluster] = {}
        for vc, count in vc_nodes.items():
            if count < 0:
                raise ValueError(f"VC {vc!r}: negative node count {count}")
            ids = tuple(f"{vc}-n{i:04d}" for i in range(count))
            nodes.extend(NodeSpec(nid, vc, gpus_per_node, gtype, cpus_per_node, topology=topo) for nid in ids)
            vcs[vc] = VirtualCluster(vc, ids)
        return cls(nodes, vcs)

    @classmethod
    def homogeneous(cls, nodes: int, gpus_per_node: int = 8, vc: str = "default", **kw) -> ClusterSpec:
        return cls.from_vc_sizes({vc: nodes}, gpus_per_node, **kw)

    def with_gpu_type(self, gtype: GpuType) -> ClusterSpec:
        """The same cluster with every node's GPUs of type ``gtype`` (memory capacity, power)."""
        nodes = [NodeSpec(n.node_id, n.vc, n.gpus, gtype, n.cpus, n.host_memory_gib, n.topology, n.idle_watts)
                 for n in self.nodes]
        return ClusterSpec(nodes, dict(self.vcs))

    @property
    def total_gpus(self) -> int:
        return sum(n.gpus for n in self.nodes)

    def vc_gpus(self, vc: str) -> int:
        ids = set(self.vcs[vc].node_ids)
        return sum(n.gpus for n in self.nodes if n.node_id in ids)
