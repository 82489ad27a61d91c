"""A whole cluster in one TOML or YAML file: node groups per VC with their hardware and power.

    # dlsched cluster
    [defaults]                 # optional; every group inherits these
    gpus = 8                   # GPUs per node
    gpu = "V100"               # a known GPU type (dlsched.core.cluster.GPU_TYPES) ...
    gpu_memory_mib = 32768     # ... whose figures may be overridden
    cpus = 64
    host_memory_gib = 512
    topology = "dgx1"          # a preset (pcie, dgx1, nvswitch, minsky), or
    # topology_file = "dgx1.txt"   an `nvidia-smi topo -m` text, relative to this file
    idle_watts = 800           # one idle node, for energy accounting

    [[groups]]                 # one or more per VC
    vc = "vc01"
    nodes = 24

YAML holds the same keys (``defaults:`` and a ``groups:`` list). An optional ``queues`` list
gives the VCs quotas that lend and borrow (read by :mod:`dlsched.traces.cluster_queues`). ``--vc-config``/``--nodes``
stay as shortcuts for homogeneous clusters; this file is what ``dlsched cluster show`` prints
and what ``dlsched trace generate`` writes beside a generated trace.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from dlsched.core.cluster import ClusterSpec, GpuType, NodeSpec, VirtualCluster, gpu_type
from dlsched.core.topology import PRESETS, preset_topology
from dlsched.topology.smi import load_topo_file
from dlsched.traces.model import TraceError
from dlsched.traces.yaml_bounds import expanded_size

NODE_KEYS = {"gpus", "gpu", "gpu_memory_mib", "gpu_idle_watts", "gpu_max_watts", "cpus", "host_memory_gib",
             "topology", "topology_file", "idle_watts"}
GROUP_KEYS = NODE_KEYS | {"vc", "nodes"}
DEFAULTS = {"gpus": 8, "gpu": "V100", "cpus": 64, "host_memory_gib": 512, "idle_watts": 800.0}
MAX_BYTES = 4 << 20
"""A cluster file is a few kB; refusing larger ones bounds what parsing can cost."""
MAX_VALUES = 100_000
"""Values a YAML file may expand to once its aliases (``*name``) are followed: bounds an alias bomb."""
MAX_NODES = 100_000
"""Nodes one cluster file may describe (the largest published clusters have a few thousand)."""
MAX_GPUS_PER_NODE = 1024
"""GPUs one node may have: the most the live service reads from a node (service/pods.py)."""
TOO_DEEP = "tables or lists nested too deeply to read (the cluster file's format needs 3 levels)"
"""A parser's RecursionError in the words of the file, which names no line."""


def read_cluster_file(path: str | Path) -> ClusterSpec:
    """The cluster a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file describes.

    Errors are :class:`TraceError` naming the file and the key (e.g. ``groups[2].gpu``)."""
    path = Path(path)
    where = str(path)
    if not path.is_file():
        raise TraceError(where, "no such file")
    data = _parse(path)
    if not isinstance(data, dict):
        raise TraceError(where, "want a table with 'groups' (and optional 'defaults')")
    unknown = set(data) - {"defaults", "groups", "name", "queues", "fair_share_half_life"}
    if unknown:
        raise TraceError(where, f"unknown top-level key(s) {', '.join(sorted(unknown))}; "
                                "want defaults, groups (and optional name, queues, fair_share_half_life)")
    given = _table(data.get("defaults", {}), NODE_KEYS, where, "defaults")
    defaults = {**DEFAULTS, **given}
    groups = data.get("groups")
    if not isinstance(groups, list) or not groups:
        raise TraceError(where, "'groups' must list at least one node group (vc, nodes)")
    nodes: list[NodeSpec] = []
    members: dict[str, list[str]] = {}
    text = path.read_text(encoding="utf-8", errors="replace")
    total = 0
    for i, raw in enumerate(groups, 1):
        what = f"groups[{i}]"
        own = _table(raw, GROUP_KEYS, where, what)
        group = {**defaults, **own}
        vc = str(group.get("vc", "")).strip()
        if not vc:
            raise TraceError(where, f"{what}: 'vc' is missing")
        try:
            count = _int(group.get("nodes"), where, f"{what}.nodes", minimum=1)
            total += count
            if total > MAX_NODES:
                raise TraceError(where, f"{what}.nodes = {count:,}: the file describes more than "
                                        f"{MAX_NODES:,} nodes in all (the limit)")
            spec = _node_template(group, path, what)
        except TraceError as exc:
            raise _located(exc, text, what, own, given) from None
        ids = members.setdefault(vc, [])
        for _ in range(count):
            node_id = f"{vc}-n{len(ids):04d}"
            ids.append(node_id)
            nodes.append(NodeSpec(node_id, vc, spec["gpus"], spec["gpu_type"], spec["cpus"],
                                  spec["host_memory_gib"], spec["topology"], spec["idle_watts"]))
    return ClusterSpec(nodes, {vc: VirtualCluster(vc, tuple(ids)) for vc, ids in members.items()})


def _located(exc: TraceError, text: str, what: str, own: dict, given: dict) -> TraceError:
    """``exc`` naming the line of the bad key, and ``defaults.KEY`` when the group inherited it."""
    message = exc.reason
    key = message.split(" ", 1)[0].removeprefix(what + ".").rstrip(":")
    inherited = key in given and key not in own
    if inherited:
        message = message.replace(f"{what}.{key}", f"defaults.{key}", 1) + f" (inherited by {what})"
    value = (given if inherited else own).get(key)
    line = _line_of(text, key, value if isinstance(value, (str, int, float)) else None)
    return TraceError(exc.path, message, line=line) if line else exc


def _line_of(text: str, key: str, value: object = None) -> int | None:
    """The line that sets ``key`` (``key = ...`` in TOML, ``key: ...`` in YAML), to ``value`` when
    several do; None when no line does (e.g. a YAML flow mapping)."""
    import re

    pattern = re.compile(rf"^[\s-]*{re.escape(key)}\s*[:=]")
    found = [(n, line) for n, line in enumerate(text.splitlines(), 1) if pattern.match(line)]
    if value is not None:
        exact = [n for n, line in found if str(value) in line.split(":", 1)[-1].split("=", 1)[-1]]
        if exact:
            return exact[0]
    return found[0][0] if found else None


def _bounded_yaml(text: bytes, path: Path) -> Any:
    """``yaml.safe_load`` after checking that aliases do not expand the file past MAX_VALUES values.

    An alias bomb (each level a list of aliases to the level before) is a few hundred bytes that
    expand to billions of values; the node graph is composed without expanding it and its
    expanded size counted with one memo per node, so the check itself costs nothing."""
    import yaml

    root = yaml.compose(text, Loader=yaml.SafeLoader)
    if expanded_size(root, MAX_VALUES) > MAX_VALUES:
        raise TraceError(str(path), f"its YAML aliases (*name) expand to more than {MAX_VALUES:,} values "
                                    "(the limit; a cluster file needs a few dozen)")
    return yaml.safe_load(text)


def _parse(path: Path) -> Any:
    suffix = path.suffix.lower()
    if path.stat().st_size > MAX_BYTES:
        raise TraceError(str(path), f"{path.stat().st_size:,} bytes: a cluster file may hold at most "
                                    f"{MAX_BYTES:,} bytes (the limit)")
    text = path.read_bytes()
    if suffix == ".toml":
        import tomllib

        try:
            return tomllib.loads(text.decode("utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
            raise TraceError(str(path), f"not valid TOML: {exc}") from None
        except RecursionError:
            raise TraceError(str(path), TOO_DEEP) from None
    if suffix in (".yaml", ".yml"):
        try:
            import yaml
        except ModuleNotFoundError:
            raise TraceError(str(path), "YAML cluster files need PyYAML (pip install pyyaml); TOML needs "
                                        "nothing extra") from None
        try:
            return _bounded_yaml(text, path)
        except yaml.YAMLError as exc:
            raise TraceError(str(path), f"not valid YAML: {' '.join(str(exc).split())}") from None
        except RecursionError:
            raise TraceError(str(path), TOO_DEEP) from None
    raise TraceError(str(path), "a cluster file ends in .toml, .yaml or .yml")


def _table(raw: Any, allowed: set[str], where: str, what: str) -> dict:
    if not isinstance(raw, dict):
        raise TraceError(where, f"{what}: want a table of keys")
    unknown = set(raw) - allowed
    if unknown:
        raise TraceError(where, f"{what}: unknown key(s) {', '.join(sorted(unknown))}; "
                                f"known: {', '.join(sorted(allowed))}")
    return dict(raw)


def _int(value: Any, where: str, what: str, minimum: int = 0) -> int:
    number = isinstance(value, (int, float)) and not isinstance(value, bool)
    whole = number and math.isfinite(value) and value == int(value)   # inf, nan: no int() to raise
    if not whole or value < minimum:
        raise TraceError(where, f"{what} = {_short(value)}: want a whole number >= {minimum}")
    return int(value)


def _short(value: Any) -> str:
    """``repr(value)``, at most 60 characters (a value may be a huge nested structure)."""
    if isinstance(value, (dict, list)):
        return "a table" if isinstance(value, dict) else "a list"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _num(value: Any, where: str, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not (math.isfinite(value) and value >= 0):
        raise TraceError(where, f"{what} = {_short(value)}: want a finite number >= 0")
    return float(value)


def _node_template(group: dict, path: Path, what: str) -> dict:
    """Hardware of one node of ``group`` (GPU type with overrides, topology)."""
    where = str(path)
    gpus = _int(group["gpus"], where, f"{what}.gpus", minimum=1)
    if gpus > MAX_GPUS_PER_NODE:
        raise TraceError(where, f"{what}.gpus = {gpus:,}: at most {MAX_GPUS_PER_NODE:,} GPUs a node (the limit)")
    try:
        base = gpu_type(str(group["gpu"]))
    except ValueError as exc:
        raise TraceError(where, f"{what}.gpu: {exc}") from None
    gtype = GpuType(base.name,
                    _int(group.get("gpu_memory_mib", base.memory_mib), where, f"{what}.gpu_memory_mib", 1),
                    _num(group.get("gpu_idle_watts", base.idle_watts), where, f"{what}.gpu_idle_watts"),
                    _num(group.get("gpu_max_watts", base.max_watts), where, f"{what}.gpu_max_watts"))
    topology = None
    if group.get("topology") and group.get("topology_file"):
        raise TraceError(where, f"{what}: give topology or topology_file, not both")
    if group.get("topology"):
        try:
            topology = preset_topology(str(group["topology"]), gpus)
        except ValueError as exc:
            raise TraceError(where, f"{what}.topology: {exc}") from None
    elif group.get("topology_file"):
        file = (path.parent / str(group["topology_file"])).resolve()
        try:
            topology = load_topo_file(file).to_node_topology(file.stem)
        except (OSError, ValueError) as exc:
            raise TraceError(where, f"{what}.topology_file {file}: {exc}") from None
    if topology is not None and topology.gpus != gpus:
        raise TraceError(where, f"{what}: the topology has {topology.gpus} GPUs but gpus = {gpus}")
    return {"gpus": gpus, "gpu_type": gtype, "cpus": _int(group["cpus"], where, f"{what}.cpus", 1),
            "host_memory_gib": _int(group["host_memory_gib"], where, f"{what}.host_memory_gib", 1),
            "topology": topology, "idle_watts": _num(group["idle_watts"], where, f"{what}.idle_watts")}


def cluster_to_toml(cluster: ClusterSpec, title: str = "") -> str:
    """The cluster as a TOML cluster file: one group per run of identical nodes within a VC."""
    lines = [f"# dlsched cluster{': ' + title if title else ''}",
             f"# {len(cluster.nodes)} nodes, {cluster.total_gpus} GPUs, {len(cluster.vcs)} VCs",
             "# simulate with: dlsched simulate --cluster THIS_FILE ...", ""]
    by_id = {n.node_id: n for n in cluster.nodes}
    for vc, members in cluster.vcs.items():
        runs: list[tuple[NodeSpec, int]] = []
        for node_id in members.node_ids:
            node = by_id[node_id]
            if runs and _same(runs[-1][0], node):
                runs[-1] = (runs[-1][0], runs[-1][1] + 1)
            else:
                runs.append((node, 1))
        for node, count in runs:
            g = node.gpu_type
            lines += ["[[groups]]", f"vc = {_q(vc)}", f"nodes = {count}", f"gpus = {node.gpus}",
                      f"gpu = {_q(g.name)}", f"gpu_memory_mib = {g.memory_mib}",
                      f"gpu_idle_watts = {g.idle_watts:g}", f"gpu_max_watts = {g.max_watts:g}",
                      f"cpus = {node.cpus}", f"host_memory_gib = {node.host_memory_gib}",
                      f"idle_watts = {node.idle_watts:g}"]
            if node.topology is not None:
                preset = _preset_name(node)
                if preset is not None:
                    lines.append(f"topology = {_q(preset)}")
                else:  # parsed from nvidia-smi text: point topology_file at that text again
                    lines.append(f"# topology {node.topology.name!r} came from an nvidia-smi file: "
                                 "add topology_file = \"...\"")
            lines.append("")
    return "\n".join(lines)


def _preset_name(node: NodeSpec) -> str | None:
    """The preset (``--topology`` name) whose topology this node has, if any."""
    for name in PRESETS:
        try:
            if preset_topology(name, node.gpus) == node.topology:
                return name
        except ValueError:
            continue
    return None


def _same(a: NodeSpec, b: NodeSpec) -> bool:
    return (a.gpus, a.gpu_type, a.cpus, a.host_memory_gib, a.topology, a.idle_watts) == \
        (b.gpus, b.gpu_type, b.cpus, b.host_memory_gib, b.topology, b.idle_watts)


def _q(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
