"""Weighted physical topology graph: network -> machine -> socket -> (PCIe switch) -> GPU.

Section 4.1.2 / Figure 7 of Amaral et al. (SC17): vertices per level, edges weighted
qualitatively with *higher levels heavier* (GPU-level edges weigh 1, socket-level 20), plus
direct GPU-GPU NVLink edges. A path's length is the sum of its edge weights; the
communication cost (Eq. 3) sums these shortest-path lengths over GPU pairs.

A machine graph is built once per topology (``machine_graph`` is cached) and the cluster
graph only adds one network vertex with an edge to every machine, so GPU distances across
machines are ``up(a) + 2 * W_NETWORK + up(b)`` and never need a cluster-wide search.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from functools import lru_cache

from dlsched.core.topology import Link, NodeTopology, preset_topology

# Edge weights per level (Sec. 4.1.2: "each level right after the GPU level has weight 1,
# whilst at higher levels, such as the socket level, the edges have weight 20").
W_GPU = 1          # GPU -> its first parent (PCIe switch, NVSwitch or socket); also NVLink edges
W_BRIDGE = 2       # PCIe switch -> upstream PCIe bridge (PXB: several bridges, no host bridge)
W_SWITCH = 5       # PCIe switch or bridge -> socket (through the PCIe host bridge)
W_SOCKET = 20      # socket -> machine (the SMP/QPI bus between sockets)
W_NETWORK = 100    # machine -> network


@dataclass(slots=True)
class Vertex:
    """One vertex; ``kind`` is network/machine/socket/switch/nvswitch/gpu."""

    name: str
    kind: str
    level: int          # 0 network, 1 machine, 2 socket, 3 switch, 4 gpu
    gpu: int = -1       # local GPU index for GPU vertices


@dataclass(slots=True)
class PhysicalGraph:
    """Undirected weighted graph with integer weights (FM gain buckets need integers)."""

    vertices: list[Vertex] = field(default_factory=list)
    edges: dict[tuple[int, int], int] = field(default_factory=dict)

    def add_vertex(self, name: str, kind: str, level: int, gpu: int = -1) -> int:
        self.vertices.append(Vertex(name, kind, level, gpu))
        return len(self.vertices) - 1

    def add_edge(self, a: int, b: int, w: int) -> None:
        if a == b:
            raise ValueError("self loops are not allowed")
        key = (a, b) if a < b else (b, a)
        # Parallel links collapse to the cheapest one: distance is what matters.
        self.edges[key] = min(w, self.edges.get(key, w))

    def adjacency(self) -> list[list[tuple[int, int]]]:
        adj: list[list[tuple[int, int]]] = [[] for _ in self.vertices]
        for (a, b), w in self.edges.items():
            adj[a].append((b, w))
            adj[b].append((a, w))
        return adj

    def count(self, kind: str) -> int:
        return sum(1 for v in self.vertices if v.kind == kind)

    def edges_between(self, kind_a: str, kind_b: str) -> list[tuple[int, int, int]]:
        """Edges whose endpoint kinds are {kind_a, kind_b} (handy for tests and summaries)."""
        out = []
        for (a, b), w in self.edges.items():
            ka, kb = self.vertices[a].kind, self.vertices[b].kind
            if {ka, kb} == {kind_a, kind_b} and (ka == kind_a or kb == kind_a):
                out.append((a, b, w))
        return out

    def shortest_from(self, src: int) -> list[float]:
        """Dijkstra from ``src``; GPUs other than ``src`` are never transit vertices.

        Peer-to-peer traffic is not forwarded through a third GPU (Sec. 1: DGX-1 GPU1->GPU5
        goes over PCIe switches and the system bus), so a GPU ends a path, never relays it.
        """
        adj = self.adjacency()
        dist = [float("inf")] * len(self.vertices)
        dist[src] = 0.0
        heap = [(0.0, src)]
        while heap:
            d, u = heapq.heappop(heap)
            if d > dist[u]:
                continue
            if u != src and self.vertices[u].kind == "gpu":
                continue
            for v, w in adj[u]:
                nd = d + w
                if nd < dist[v]:
                    dist[v] = nd
                    heapq.heappush(heap, (nd, v))
        return dist


@dataclass(frozen=True, slots=True)
class MachineGraph:
    """The graph of one machine plus everything placement needs precomputed.

    ``dist[a][b]`` is the shortest-path length between local GPUs a and b; ``socket_of``
    maps GPU -> socket; ``up`` is each GPU's distance to the machine vertex (used for
    cross-machine paths); ``nvlink_peak`` says whether the fastest GPU link is NVLink/NVSwitch
    (the pack/spread table of Sec. 3.2 differs for NVLink and PCIe machines). ``sockets``,
    ``socket_size``, ``diameter`` and ``nearest`` are derived from them.
    """

    name: str
    graph: PhysicalGraph
    machine_vertex: int
    gpu_vertex: tuple[int, ...]
    socket_of: tuple[int, ...]
    dist: tuple[tuple[int, ...], ...]
    up: tuple[int, ...]
    nvlink_peak: bool

    sockets: int = field(init=False)
    socket_size: int = field(init=False)   # largest number of GPUs on one socket (minimum socket span)
    diameter: int = field(init=False)      # longest GPU-GPU shortest path inside the machine (cross-socket)
    nearest: int = field(init=False)       # shortest GPU-GPU distance (1 for NVLink, 2 for a shared switch)

    def __post_init__(self) -> None:
        # derived once: the placement search reads them in its inner loops
        n = len(self.gpu_vertex)
        sockets = max(self.socket_of) + 1 if self.socket_of else 0
        object.__setattr__(self, "sockets", sockets)
        object.__setattr__(self, "socket_size", max(self.socket_of.count(s) for s in range(sockets)) if n else 0)
        object.__setattr__(self, "diameter", max((max(row) for row in self.dist), default=0))
        object.__setattr__(self, "nearest", min((self.dist[a][b] for a in range(n) for b in range(n) if a != b),
                                                default=0))

    @property
    def gpus(self) -> int:
        return len(self.gpu_vertex)


def _groups(n: int, related) -> list[list[int]]:
    """Connected components of a symmetric relation over range(n), in index order."""
    seen = [False] * n
    out = []
    for s in range(n):
        if seen[s]:
            continue
        comp, stack = [], [s]
        seen[s] = True
        while stack:
            u = stack.pop()
            comp.append(u)
            for v in range(n):
                if not seen[v] and related(u, v):
                    seen[v] = True
                    stack.append(v)
        out.append(sorted(comp))
    return out


def build_machine_graph(topo: NodeTopology, pix_groups: list[list[int]] | None = None) -> MachineGraph:
    """Derive the level graph from a link matrix.

    * GPUs whose link is PIX share a PCIe-switch vertex; PXB groups get a bridge vertex above
      their switches; every top-most group hangs off its socket.
    * NVLINK pairs get a direct GPU-GPU edge of weight 1; NVSWITCH pairs share an NVSwitch
      vertex (GPU->NVSwitch weight 1, so two GPUs are 2 apart through it).
    * ``pix_groups`` names PCIe-switch groups explicitly, for switches the GPU x GPU matrix
      hides behind NVLink entries (DGX-1 wires every GPU pair to a PCIe switch as well, Sec. 1;
      the nvidia-smi parser infers them from NIC rows). Default: one switch per consecutive
      pair for ``dgx1*``, else the PIX components of the matrix.
    """
    n = topo.gpus
    g = PhysicalGraph()
    m = g.add_vertex(f"M:{topo.name}", "machine", 1)
    sockets = [g.add_vertex(f"S{s}", "socket", 2) for s in range(topo.sockets)]
    gv = [g.add_vertex(f"GPU{i}", "gpu", 4, gpu=i) for i in range(n)]
    for s in sockets:
        g.add_edge(m, s, W_SOCKET)

    link = topo.link
    if pix_groups is None:
        if topo.name.startswith("dgx1"):
            pix_groups = [list(range(i, min(i + 2, n))) for i in range(0, n, 2)]
        else:
            pix_groups = _groups(n, lambda a, b: a != b and link(a, b) == Link.PIX)
    has_nvswitch = n > 1 and all(link(a, b) == Link.NVSWITCH for a in range(n) for b in range(n) if a != b)

    switch_of: dict[int, int] = {}
    for k, grp in enumerate(pix_groups):
        if len(grp) > 1:
            sw = g.add_vertex(f"PCIe{k}", "switch", 3)
            for gpu in grp:
                g.add_edge(gv[gpu], sw, W_GPU)
                switch_of[gpu] = sw
    # PXB bridges join switch groups (or lone GPUs) within a socket.
    pxb_groups = _groups(n, lambda a, b: a != b and link(a, b) in (Link.PIX, Link.PXB))
    top_of: dict[int, int] = {}
    for k, grp in enumerate(pxb_groups):
        members = {switch_of.get(gpu, gv[gpu]) for gpu in grp}
        if len(members) > 1 and any(link(a, b) == Link.PXB for a in grp for b in grp if a != b):
            br = g.add_vertex(f"PXB{k}", "switch", 3)
            for mem in members:
                g.add_edge(mem, br, W_BRIDGE if g.vertices[mem].kind == "switch" else W_GPU)
            for gpu in grp:
                top_of[gpu] = br
        else:
            for gpu in grp:
                top_of[gpu] = switch_of.get(gpu, gv[gpu])
    for gpu in range(n):
        top = top_of[gpu]
        w = W_GPU if top == gv[gpu] else W_SWITCH
        g.add_edge(top, sockets[topo.gpu_socket[gpu]], w)

    if has_nvswitch:
        nvs = g.add_vertex("NVSwitch", "nvswitch", 3)
        for gpu in range(n):
            g.add_edge(gv[gpu], nvs, W_GPU)
    for a in range(n):
        for b in range(a + 1, n):
            if link(a, b) == Link.NVLINK:
                g.add_edge(gv[a], gv[b], W_GPU)

    all_dist = [g.shortest_from(v) for v in gv]
    dist = tuple(tuple(int(all_dist[a][gv[b]]) for b in range(n)) for a in range(n))
    up = tuple(int(all_dist[a][m]) for a in range(n))
    nvlink_peak = any(link(a, b) in (Link.NVLINK, Link.NVSWITCH) for a in range(n) for b in range(n) if a != b)
    return MachineGraph(topo.name, g, m, tuple(gv), tuple(topo.gpu_socket), dist, up, nvlink_peak)


@lru_cache(maxsize=64)
def machine_graph(preset: str, gpus: int = 8) -> MachineGraph:
    """Cached machine graph of a core preset (``minsky``, ``dgx1``, ``pcie``, ``nvswitch``)."""
    if preset == "minsky":
        gpus = 4
    return build_machine_graph(preset_topology(preset, gpus))


PRESET_GPUS = {"minsky": 4, "dgx1": 8, "pcie": 8, "nvswitch": 8}


def cluster_graph(machines: list[MachineGraph]) -> PhysicalGraph:
    """Explicit whole-cluster graph (network vertex + every machine graph); for display/tests.

    Placement never materialises this: it uses the per-machine graphs plus ``W_NETWORK``.
    """
    g = PhysicalGraph()
    net = g.add_vertex("network", "network", 0)
    for i, mg in enumerate(machines):
        offset = len(g.vertices)
        for v in mg.graph.vertices:
            g.add_vertex(f"M{i}/{v.name}" if v.kind != "machine" else f"M{i}", v.kind, v.level, v.gpu)
        for (a, b), w in mg.graph.edges.items():
            g.add_edge(a + offset, b + offset, w)
        g.add_edge(net, offset + mg.machine_vertex, W_NETWORK)
    return g


def summary(mg: MachineGraph) -> dict:
    """Counts and weights for display (``dlsched topo show``)."""
    g = mg.graph
    kinds: dict[str, int] = {}
    for v in g.vertices:
        kinds[v.kind] = kinds.get(v.kind, 0) + 1
    nvl = len(g.edges_between("gpu", "gpu"))
    return {
        "name": mg.name,
        "gpus": mg.gpus,
        "sockets": mg.sockets,
        "vertices": kinds,
        "edges": len(g.edges),
        "nvlink_edges": nvl,
        "diameter": mg.diameter,
        "distance_matrix": [list(r) for r in mg.dist],
        "socket_of": list(mg.socket_of),
    }
