"""Static description of a cluster: node specs, GPU types, virtual clusters.

Runtime occupancy lives in ``dlsched.kernel.state.ClusterState`` (the one owner of state);
this module only says what hardware exists and who owns it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dlsched.core.topology import NodeTopology, preset_topology


@dataclass(frozen=True, slots=True)
class GpuType:
    """A GPU model and the figures the predictors and energy model need."""

    name: str = "V100"
    memory_mib: int = 32 * 1024
    idle_watts: float = 50.0
    max_watts: float = 300.0


# Data-sheet figures (memory per GPU; board power). A K80 board holds two GPUs of 12 GiB each.
GPU_TYPES: dict[str, GpuType] = {
    "K80": GpuType("K80", 12 * 1024, 25.0, 150.0),
    "P100": GpuType("P100", 16 * 1024, 30.0, 250.0),
    "V100": GpuType("V100", 32 * 1024, 50.0, 300.0),
    "V100-16GB": GpuType("V100-16GB", 16 * 1024, 50.0, 300.0),
    "T4": GpuType("T4", 16 * 1024, 10.0, 70.0),
    "RTX2080": GpuType("RTX2080", 8 * 1024, 20.0, 215.0),   # Horus's testbed
    "TitanXp": GpuType("TitanXp", 12 * 1024, 15.0, 250.0),  # Co-scheML's testbed
    "RTX3090": GpuType("RTX3090", 24 * 1024, 30.0, 350.0),
    "A100": GpuType("A100", 40 * 1024, 50.0, 400.0),
    "A100-80GB": GpuType("A100-80GB", 80 * 1024, 50.0, 400.0),
    "H100": GpuType("H100", 80 * 1024, 70.0, 700.0),
}


def gpu_type(name: str) -> GpuType:
    """A known GPU type by name (case-insensitive)."""
    for key, value in GPU_TYPES.items():
        if key.lower() == name.lower():
            return value
    raise ValueError(f"unknown GPU type {name!r}; choose from {', '.join(GPU_TYPES)}")


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
    ) -> "ClusterSpec":
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
    def homogeneous(cls, nodes: int, gpus_per_node: int = 8, vc: str = "default", **kw) -> "ClusterSpec":
        return cls.from_vc_sizes({vc: nodes}, gpus_per_node, **kw)

    def with_gpu_type(self, gtype: GpuType) -> "ClusterSpec":
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
