"""Intra-node topology: machine -> socket -> GPU, with link types between GPU pairs.

This is the compact per-node description the cluster model carries. The weighted
physical-graph used by topology-aware placement is built from it in ``dlsched.topology``.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import IntEnum


class Link(IntEnum):
    """GPU-to-GPU connection classes, fastest first (nvidia-smi topo naming)."""

    NVSWITCH = 0   # all-to-all through NVSwitch
    NVLINK = 1     # direct NVLink (NV1/NV2/...)
    PIX = 2        # same PCIe switch
    PXB = 3        # several PCIe bridges, same socket
    PHB = 4        # through the CPU host bridge, same socket
    SYS = 5        # across sockets (QPI/UPI/SMP)


@dataclass(frozen=True, slots=True)
class NodeTopology:
    """GPU -> socket map plus a symmetric GPU x GPU link matrix."""

    name: str
    gpu_socket: tuple[int, ...]
    links: tuple[tuple[Link, ...], ...]

    @property
    def gpus(self) -> int:
        return len(self.gpu_socket)

    @property
    def sockets(self) -> int:
        return max(self.gpu_socket) + 1 if self.gpu_socket else 0

    def link(self, a: int, b: int) -> Link:
        return self.links[a][b]


def _build(name: str, gpu_socket: list[int], link_of) -> NodeTopology:
    n = len(gpu_socket)
    rows = tuple(tuple(Link.NVSWITCH if a == b else link_of(a, b) for b in range(n)) for a in range(n))
    return NodeTopology(name, tuple(gpu_socket), rows)


def pcie_dual_socket(gpus: int = 8) -> NodeTopology:
    """GPUs split over two sockets; pairs share a PCIe switch; cross-socket is SYS."""
    half = max(1, gpus // 2)
    sock = [0 if g < half else 1 for g in range(gpus)]

    def link(a: int, b: int) -> Link:
        if sock[a] != sock[b]:
            return Link.SYS
        return Link.PIX if a // 2 == b // 2 else Link.PHB

    return _build(f"pcie-{gpus}gpu-2socket", sock, link)


# DGX-1 (P100/V100) hybrid cube-mesh: each GPU has NVLink to 4 (P100) peers.
_DGX1_NVLINK = {
    0: {1, 2, 3, 4}, 1: {0, 2, 3, 5}, 2: {0, 1, 3, 6}, 3: {0, 1, 2, 7},
    4: {0, 5, 6, 7}, 5: {1, 4, 6, 7}, 6: {2, 4, 5, 7}, 7: {3, 4, 5, 6},
}


def dgx1() -> NodeTopology:
    """NVIDIA DGX-1: 8 GPUs, 2 sockets, NVLink hybrid cube-mesh, SYS elsewhere."""
    sock = [0, 0, 0, 0, 1, 1, 1, 1]

    def link(a: int, b: int) -> Link:
        if b in _DGX1_NVLINK[a]:
            return Link.NVLINK
        return Link.PHB if sock[a] == sock[b] else Link.SYS

    return _build("dgx1", sock, link)


def nvswitch(gpus: int = 8) -> NodeTopology:
    """DGX-2/HGX style: every GPU pair through NVSwitch."""
    half = max(1, gpus // 2)
    return _build(f"nvswitch-{gpus}gpu", [0 if g < half else 1 for g in range(gpus)], lambda a, b: Link.NVSWITCH)


def minsky() -> NodeTopology:
    """IBM Power8 'Minsky': 2 sockets x 2 P100, NVLink within a socket, SMP bus across."""
    sock = [0, 0, 1, 1]
    return _build("minsky", sock, lambda a, b: Link.NVLINK if sock[a] == sock[b] else Link.SYS)


PRESETS = {"pcie": pcie_dual_socket, "dgx1": dgx1, "nvswitch": nvswitch, "minsky": minsky}


def preset_topology(name: str, gpus: int = 8) -> NodeTopology:
    """A named preset: ``pcie``, ``dgx1``, ``nvswitch`` or ``minsky``."""
    try:
        factory = PRESETS[name]
    except KeyError:
        raise ValueError(f"unknown topology preset {name!r}; choose from {', '.join(sorted(PRESETS))}") from None
    if name in ("dgx1", "minsky"):
        topo = factory()
        if topo.gpus != gpus:
            raise ValueError(f"preset {name!r} has {topo.gpus} GPUs per node, not {gpus}")
        return topo
    return factory(gpus)
