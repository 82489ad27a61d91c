"""Parser for ``nvidia-smi topo -m`` (a.k.a. ``--matrix``) text.

The paper's prototype discovers each machine's topology with this command (Sec. 5.1). The
text is a device x device matrix: GPU rows, optional NIC rows (``mlx5_0`` on older drivers,
``NIC0`` plus a "NIC Legend" on newer ones), trailing affinity columns ("CPU Affinity",
"NUMA Affinity", "GPU NUMA ID"), then a legend. Cell codes: ``X`` self, ``NV#`` a bonded set
of # NVLinks, ``PIX``/``PXB``/``PHB``/``NODE``/``SYS`` (``SOC`` on old drivers) for PCIe
paths of increasing length. Malformed input raises :class:`TopoParseError` naming the line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from dlsched.core.topology import Link, NodeTopology
from dlsched.topology.graph import MachineGraph, build_machine_graph

# Multi-word header names, longest first so "GPU NUMA ID" is not read as "NUMA ...".
_HEADER_PHRASES = ("GPU NUMA ID", "CPU Affinity", "NUMA Affinity")
_CODES = {"X", "PIX", "PXB", "PHB", "NODE", "SYS", "SOC"}
_NV = re.compile(r"^NV(\d+)$")
MAX_DEVICES = 512   # GPUs and NICs in one matrix: the largest machines have a few dozen
MAX_BYTES = 1 << 20   # `nvidia-smi topo -m` prints a few kB
SHOWN = 120   # characters of an offending line an error quotes
_DEVICE = re.compile(r"^(GPU\d+|NIC\d+|mlx\d+_\d+|[A-Za-z][\w.-]*)$")


class TopoParseError(ValueError):
    """Malformed ``nvidia-smi topo -m`` text; the message names the offending line."""

    def __init__(self, lineno: int, line: str, why: str) -> None:
        text = line.strip()
        text = text if len(text) <= SHOWN else text[:SHOWN] + "..."
        super().__init__(f"line {lineno}: {why}: {text!r}")
        self.lineno = lineno


@dataclass(slots=True)
class SmiTopology:
    """What the matrix says, before it becomes a graph."""

    gpus: list[str]
    nics: list[str]
    links: list[list[str]]                  # GPU x GPU codes ("X", "NV2", "PIX", ...)
    nic_links: list[list[str]]              # GPU x NIC codes
    cpu_affinity: list[str] = field(default_factory=list)
    numa_affinity: list[str] = field(default_factory=list)
    nic_names: dict[str, str] = field(default_factory=dict)   # NIC0 -> mlx5_0 (NIC legend)

    def nvlink_lanes(self, a: int, b: int) -> int:
        m = _NV.match(self.links[a][b])
        return int(m.group(1)) if m else 0

    def sockets(self) -> list[int]:
        """GPU -> socket: NUMA affinity if given, else CPU affinity, else non-SYS components."""
        for col in (self.numa_affinity, self.cpu_affinity):
            if col and all(v and v.upper() != "N/A" for v in col):
                order: dict[str, int] = {}
                return [order.setdefault(v, len(order)) for v in col]
        n = len(self.gpus)
        sock = [-1] * n
        nxt = 0
        for s in range(n):
            if sock[s] >= 0:
                continue
            stack = [s]
            sock[s] = nxt
            while stack:
                u = stack.pop()
                for v in range(n):
                    if sock[v] < 0 and self.links[u][v] not in ("SYS", "SOC"):
                        sock[v] = nxt
                        stack.append(v)
            nxt += 1
        return sock

    def to_node_topology(self, name: str = "smi") -> NodeTopology:
        """Map the codes onto the core ``Link`` classes (NODE -> PHB, SOC -> SYS)."""
        n = len(self.gpus)
        nv_all = n > 1 and all(_NV.match(self.links[a][b]) for a in range(n) for b in range(n) if a != b)

        def code(c: str) -> Link:
            if c == "X":
                return Link.NVSWITCH
            if _NV.match(c):
                # every pair on NVLink (NV12 on HGX A100/H100 boards) means an NVSwitch fabric
                return Link.NVSWITCH if nv_all and n > 2 else Link.NVLINK
            return {"PIX": Link.PIX, "PXB": Link.PXB, "PHB": Link.PHB, "NODE": Link.PHB,
                    "SYS": Link.SYS, "SOC": Link.SYS}[c]

        rows = tuple(tuple(code(c) for c in row) for row in self.links)
        return NodeTopology(name, tuple(self.sockets()), rows)

    def pix_groups(self) -> list[list[int]]:
        """PCIe-switch groups: GPUs PIX to each other or to the same NIC.

        On NVLink machines the GPU x GPU cells show NV#, hiding the PCIe switch a GPU pair
        shares; the NIC rows still reveal it (DGX-1: mlx5_0 is PIX to GPU0 and GPU1).
        """
        n = len(self.gpus)
        parent = list(range(n))

        def find(x: int) -> int:
            while parent[x] != x:
                parent[x] = parent[parent[x]]
                x = parent[x]
            return x

        for a in range(n):
            for b in range(a + 1, n):
                if self.links[a][b] == "PIX":
                    parent[find(a)] = find(b)
        for k in range(len(self.nics)):
            near = [g for g in range(n) if self.nic_links[g][k] == "PIX"]
            for g in near[1:]:
                parent[find(g)] = find(near[0])
        groups: dict[int, list[int]] = {}
        for g in range(n):
            groups.setdefault(find(g), []).append(g)
        return sorted(groups.values())

    def machine_graph(self, name: str = "smi") -> MachineGraph:
        return build_machine_graph(self.to_node_topology(name), self.pix_groups())


def _split_header(line: str) -> list[str]:
    text = line
    marks: list[str] = []
    for phrase in _HEADER_PHRASES:
        while phrase in text:
            token = f"\x00{len(marks)}\x00"
            marks.append(phrase)
            text = text.replace(phrase, token, 1)
    out = []
    for tok in text.split():
        m = re.fullmatch(r"\x00(\d+)\x00", tok)
        out.append(marks[int(m.group(1))] if m else tok)
    return out


def _looks_like_code(cell: str) -> bool:
    """Upper-case letters/digits only: a (possibly unknown) link code, not an affinity list."""
    return bool(re.fullmatch(r"[A-Z][A-Z0-9#]*", cell.strip()))


def _check_code(cell: str, lineno: int, line: str) -> str:
    c = cell.strip()
    if c in _CODES or _NV.match(c):
        return c
    raise TopoParseError(lineno, line, f"unknown link code {c!r}")


def parse_topo_matrix(text: str) -> SmiTopology:
    """Parse the text of ``nvidia-smi topo -m``; raise :class:`TopoParseError` when malformed."""
    lines = text.splitlines()
    # The header names GPU0 and carries no cells (no "X"); the GPU0 row has its "X".
    header_at = next((i for i, ln in enumerate(lines) if "GPU0" in ln.split() and "X" not in ln.split()), None)
    if header_at is None:
        raise TopoParseError(1, lines[0] if lines else "", "no header row with GPU0 found")
    header = _split_header(lines[header_at])
    devices = [h for h in header if h not in _HEADER_PHRASES]
    if len(devices) > MAX_DEVICES:
        raise TopoParseError(header_at + 1, lines[header_at], f"{len(devices):,} devices: at most {MAX_DEVICES} "
                                                              "(the limit)")
    extras = [h for h in header if h in _HEADER_PHRASES]
    if header[: len(devices)] != devices:
        raise TopoParseError(header_at + 1, lines[header_at], "affinity columns must follow the device columns")
    gpus = [d for d in devices if re.fullmatch(r"GPU\d+", d)]
    nics = [d for d in devices if d not in gpus]
    if devices[: len(gpus)] != gpus:
        raise TopoParseError(header_at + 1, lines[header_at], "GPU columns must come first")
    n, nd = len(gpus), len(devices)

    rows: dict[str, tuple[list[str], list[str], int]] = {}
    nic_names: dict[str, str] = {}
    i = header_at + 1
    while i < len(lines):
        raw = lines[i]
        lineno = i + 1
        stripped = raw.strip()
        i += 1
        if not stripped:
            if len(rows) >= nd:
                break
            continue
        if stripped.startswith("Legend"):
            break
        # Cells are tab separated; fall back to whitespace for copies that lost their tabs.
        cells = [c.strip() for c in raw.split("\t")] if "\t" in raw else raw.split()
        while cells and cells[-1] == "":
            cells.pop()
        name = cells[0]
        if name not in devices:
            raise TopoParseError(lineno, raw, f"row for unknown device {name!r}")
        if name in rows:
            raise TopoParseError(lineno, raw, f"duplicate row for {name}")
        body = cells[1:]
        run = 0
        while run < len(body) and (body[run].strip() in _CODES or _NV.match(body[run].strip())):
            run += 1
        if run < nd and (len(body) < nd or run == len(body) or not _looks_like_code(body[run])):
            raise TopoParseError(lineno, raw, f"expected {nd} link cells, found {run}")
        if len(body) < nd:
            raise TopoParseError(lineno, raw, f"expected {nd} link cells, found {len(body)}")
        codes = [_check_code(c, lineno, raw) for c in body[:nd]]
        tail = body[nd:]
        if name in gpus and len(tail) > len(extras):
            raise TopoParseError(lineno, raw, f"expected at most {len(extras)} affinity cells, found {len(tail)}")
        if name not in gpus and tail:
            raise TopoParseError(lineno, raw, "a NIC row carries no affinity cells")
        idx = devices.index(name)
        if codes[idx] != "X":
            raise TopoParseError(lineno, raw, f"diagonal cell of {name} must be X, found {codes[idx]!r}")
        rows[name] = (codes, tail, lineno)

    # NIC legend (newer drivers): "  NIC0: mlx5_0"
    for j in range(i, len(lines)):
        m = re.match(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$", lines[j])
        if m:
            nic_names[m.group(1)] = m.group(2)

    missing = [d for d in devices if d not in rows]
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        raise TopoParseError(header_at + 1, lines[header_at], f"no row for {shown}")
    links = [rows[g][0][:n] for g in gpus]
    for a in range(n):
        for b in range(a + 1, n):
            ca, cb = links[a][b], links[b][a]
            if ca != cb:
                ln = rows[gpus[b]][2]
                raise TopoParseError(ln, lines[ln - 1], f"{gpus[a]}-{gpus[b]} is {ca} but {gpus[b]}-{gpus[a]} is {cb}")
    nic_links = [rows[g][0][n:] for g in gpus]

    def column(label: str) -> list[str]:
        if label not in extras:
            return []
        k = extras.index(label)
        return [rows[g][1][k] if k < len(rows[g][1]) else "" for g in gpus]

    return SmiTopology(gpus, nics, links, nic_links, column("CPU Affinity"), column("NUMA Affinity"), nic_names)


def load_topo_file(path: str | Path) -> SmiTopology:
    """The matrix in the file at ``path``; ValueError (its callers name the file) when it is too
    large to be one, not text, or malformed; OSError when it cannot be read."""
    path = Path(path)
    size = path.stat().st_size
    if size > MAX_BYTES:
        raise ValueError(f"{size:,} bytes: `nvidia-smi topo -m` prints a few kB (at most {MAX_BYTES:,})")
    try:
        text = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError:
        raise ValueError("not text (want what `nvidia-smi topo -m` prints)") from None
    return parse_topo_matrix(text)
