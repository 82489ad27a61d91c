"""The cluster file's ``queues`` list: a tree of queues whose leaves are the VCs.

    fair_share_half_life = 604800  # top level, seconds: how fast queues' past usage is forgotten

    [[queues]]
    name = "research"        # an inner queue (a cohort): some queue names it as its parent
    borrow_limit = 32        # GPUs its whole subtree's jobs may hold outside it (absent: no limit)
    weight = 2               # fair share: divides the decayed usage (default 1)

    [[queues]]
    name = "vc01"            # a leaf: a VC of the file's groups
    parent = "research"      # its parent; queues without one share the root cohort
    borrow_limit = {A100 = 4}  # per GPU type (a type not named: 0), or a number: GPUs of any type
    lend_limit = 8           # GPUs of its nodes other queues' jobs may hold at once (absent: no limit)
    guarantee = 64           # optional check: its nodes' GPUs (or {V100 = 32, A100 = 32} per type)
    namespaces = ["team-a"]  # live service only: pods of these namespaces belong to this VC

A parent without an entry of its own is a top-level cohort without limits (weight 1). The live
service reads the same tables from a ConfigMap (:func:`parse_queues_text`, no cluster: the live
VCs come and go, so names and guarantees are not checked against nodes there).

A VC's guarantee is its own nodes (per GPU type), as in the Helios partition, and an inner
queue's the sum of the VCs under it; ``guarantee`` only checks that the file says what its groups
give. A VC without an entry neither borrows nor lends.
"""

from __future__ import annotations

import difflib
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any

from dlsched.core.cluster import ClusterSpec
from dlsched.kernel.queue_tree import (
    MAX_DEPTH,
    MAX_QUEUES,
    MAX_WEIGHT,
    MIN_WEIGHT,
    QueueShapeError,
    queue_depths,
)
from dlsched.kernel.quotas import DEFAULT_HALF_LIFE, QueueSpec
from dlsched.traces.cluster_file import TOO_DEEP, _int, _line_of, _parse, _short, _table, read_cluster_file
from dlsched.traces.model import TraceError

QUEUE_KEYS = {"name", "borrow_limit", "lend_limit", "parent", "guarantee", "namespaces", "weight"}
NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_TEXT = 1 << 20   # a ConfigMap value holds at most 1 MiB
HALF_LIFE_KEY = "fair_share_half_life"


def read_queues(path: str | Path, cluster: ClusterSpec | None = None) -> tuple[QueueSpec, ...]:
    """The queues the cluster file at ``path`` declares (empty when it has no ``queues``).

    Errors are :class:`TraceError` naming the file, the line and the key (``queues[2].lend_limit``)."""
    path = Path(path)
    where = str(path)
    data = _parse(path)
    raw = data.get("queues") if isinstance(data, dict) else None
    if raw is None:
        return ()
    if cluster is None:
        cluster = read_cluster_file(path)
    text = path.read_text(encoding="utf-8", errors="replace")
    return _specs(raw, where, text, cluster)


def read_half_life(path: str | Path) -> float:
    """The cluster file's ``fair_share_half_life`` in seconds (default 7 days)."""
    path = Path(path)
    data = _parse(path)
    value = data.get(HALF_LIFE_KEY) if isinstance(data, dict) else None
    if value is None:
        return DEFAULT_HALF_LIFE
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        text = path.read_text(encoding="utf-8", errors="replace")
        raise TraceError(str(path), f"{HALF_LIFE_KEY} = {_short(value)}: want a number of seconds > 0",
                         line=_line_of(text, HALF_LIFE_KEY))
    return float(value)


def parse_queues_text(text: str, where: str) -> tuple[QueueSpec, ...]:
    """The ``[[queues]]`` tables of TOML ``text`` (a ConfigMap's ``queues.toml``), checked as in a
    cluster file except against the nodes; :class:`TraceError` naming ``where``, the line and key."""
    import tomllib

    if len(text) > MAX_TEXT:
        raise TraceError(where, f"{len(text):,} characters: at most {MAX_TEXT:,}")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise TraceError(where, f"not valid TOML: {exc}") from None
    except RecursionError:
        raise TraceError(where, TOO_DEEP) from None
    unknown = sorted(set(data) - {"queues"})
    if unknown:
        raise TraceError(where, f"unknown top-level key(s) {', '.join(unknown)}: only [[queues]] tables belong here")
    raw = data.get("queues")
    return () if raw is None else _specs(raw, where, text, None)


def _specs(raw: Any, where: str, text: str, cluster: ClusterSpec | None) -> tuple[QueueSpec, ...]:
    if not isinstance(raw, list):
        raise TraceError(where, "'queues' must be a list of tables (name, borrow_limit, lend_limit, parent)")
    if len(raw) > MAX_QUEUES:
        raise TraceError(where, f"'queues' lists {len(raw):,} queues: at most {MAX_QUEUES:,} (the limit)",
                         line=_line_of(text, "[[queues]]") or None)
    specs: list[QueueSpec] = []
    guarantees: list[Any] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw, 1):
        what = f"queues[{i}]"
        with _at_line(text, what, entry):
            specs.append(_queue(entry, what, where, seen))
        guarantees.append(entry.get("guarantee"))
    by_name = {s.name: s for s in specs}
    named = Counter(s.parent for s in specs if s.parent is not None)
    gpu_types = None if cluster is None else {node.gpu_type.name for node in cluster.nodes}
    for i, (spec, entry) in enumerate(zip(specs, raw), 1):
        what = f"queues[{i}]"
        with _at_line(text, what, entry):
            _check_place(spec, by_name, named, what, where, cluster)
            if gpu_types is not None:
                _check_types(spec, gpu_types, what, where)
    _check_shape(specs, text, where)
    leaves_under: dict[str, set[str]] | None = None
    for i, (spec, entry) in enumerate(zip(specs, raw), 1):
        if guarantees[i - 1] is None or cluster is None:
            continue
        what = f"queues[{i}]"
        if spec.name in named and leaves_under is None:
            leaves_under = _leaves_under(by_name)
        with _at_line(text, what, entry):
            vcs = leaves_under[spec.name] if spec.name in named else {spec.name}
            _check_guarantee(guarantees[i - 1], what, where, spec.name, vcs, cluster)
    return tuple(specs)


class _at_line:
    """Adds the line of the key a :class:`TraceError` names (``queues[2].lend_limit``)."""

    def __init__(self, text: str, what: str, entry: Any) -> None:
        self.text, self.what, self.entry = text, what, entry

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if not isinstance(exc, TraceError) or exc.line:
            return False
        key = exc.reason.split(" ", 1)[0].removeprefix(self.what + ".").rstrip(":").split(".", 1)[0]
        value = self.entry.get(key) if isinstance(self.entry, dict) else None
        line = _line_of(self.text, key, value if isinstance(value, (str, int, float)) else None)
        if line and key in QUEUE_KEYS:
            raise TraceError(exc.path, exc.reason, line=line) from None
        return False


def _queue(entry: Any, what: str, where: str, seen: set[str]) -> QueueSpec:
    own = _table(entry, QUEUE_KEYS, where, what)
    name = own.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TraceError(where, f"{what}.name = {_short(name)}: want the name of a VC of the groups or of a cohort")
    name = name.strip()
    if name in seen:
        raise TraceError(where, f"{what}.name = {name!r}: the queue has two entries")
    seen.add(name)
    borrow, borrow_types = _limit(own.get("borrow_limit"), where, f"{what}.borrow_limit")
    lend, lend_types = _limit(own.get("lend_limit"), where, f"{what}.lend_limit")
    parent = own.get("parent")
    if parent is not None and (not isinstance(parent, str) or not parent.strip()):
        raise TraceError(where, f"{what}.parent = {_short(parent)}: want a queue or cohort name (text)")
    weight = own.get("weight", 1.0)
    if isinstance(weight, bool) or not isinstance(weight, (int, float)) or not MIN_WEIGHT <= weight <= MAX_WEIGHT:
        raise TraceError(where, f"{what}.weight = {_short(weight)}: want a number from {MIN_WEIGHT:g} to "
                                f"{MAX_WEIGHT:g} (a share relative to the other queues')")
    namespaces = own.get("namespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) and NAMESPACE_RE.match(n) for n in namespaces):
        raise TraceError(where, f"{what}.namespaces = {_short(namespaces)}: want a list of Kubernetes namespace names")
    return QueueSpec(name, borrow, lend, parent.strip() if parent else None, tuple(namespaces), float(weight),
                     borrow_types, lend_types)


def _limit(value: Any, where: str, what: str) -> tuple[int | None, tuple[tuple[str, int], ...] | None]:
    """A limit: absent (no limit), a whole number (GPUs of any type) or a table GPU type -> GPUs."""
    if value is None:
        return None, None
    if isinstance(value, dict):
        return None, tuple(sorted(_by_type(value, where, what).items()))
    return _int(value, where, what, 0), None


def _by_type(value: dict, where: str, what: str) -> dict[str, int]:
    from dlsched.core.cluster import gpu_type

    out: dict[str, int] = {}
    for key, n in value.items():
        try:
            type_name = gpu_type(str(key)).name
        except ValueError as exc:
            raise TraceError(where, f"{what}: {exc}") from None
        out[type_name] = out.get(type_name, 0) + _int(n, where, f"{what}.{key}", 0)
    return out


def _check_place(spec: QueueSpec, by_name: dict[str, QueueSpec], named: Counter, what: str, where: str,
                 cluster: ClusterSpec | None) -> None:
    """Leaves are VCs, VCs are leaves, and a parent is a queue (declared, or named by two or more)."""
    inner = spec.name in named
    parent = spec.parent
    if cluster is not None:
        if inner and spec.name in cluster.vcs:
            raise TraceError(where, f"{what}.name = {spec.name!r}: a VC is a leaf queue, but another queue names it "
                                    "as its parent")
        if not inner and spec.name not in cluster.vcs:
            raise TraceError(where, f"{what}.name = {spec.name!r}: no group has this VC and no queue names it as its "
                                    f"parent (a leaf queue is a VC; VCs: {', '.join(cluster.vcs)})")
        if parent is not None and parent in cluster.vcs and parent not in by_name:
            raise TraceError(where, f"{what}.parent = {parent!r}: a VC is a leaf queue and cannot be a parent")
    if parent is not None and parent not in by_name and named[parent] == 1:
        close = difflib.get_close_matches(parent, sorted(n for n in {*by_name, *named} if n != parent), n=1)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise TraceError(where, f"{what}.parent = {parent!r}: no queue has this name and no other queue names it "
                                "as its parent (a cohort of one queue has no one to borrow from); give it an "
                                f"entry of its own if it is meant{hint}")


def _check_types(spec: QueueSpec, gpu_types: set[str], what: str, where: str) -> None:
    """A per-type limit names only types the cluster has (a limit on another can never bind)."""
    for key, types in (("borrow_limit", spec.borrow_types), ("lend_limit", spec.lend_types)):
        for name, _ in types or ():
            if name not in gpu_types:
                raise TraceError(where, f"{what}.{key}.{name}: the cluster has no {name} GPUs (it has "
                                        f"{', '.join(sorted(gpu_types))}), so this limit can never bind")


def _check_shape(specs: list[QueueSpec], text: str, where: str) -> None:
    """No cycle and at most MAX_DEPTH levels: one walk over the tree, linear in its queues."""
    index = {s.name: i for i, s in enumerate(specs, 1)}
    try:
        queue_depths({s.name: s.parent for s in specs})
    except QueueShapeError as exc:
        i = index[exc.name]
        what = f"queues[{i}]"
        spec = specs[i - 1]
        line = _line_of(text, "parent", spec.parent) if _unique_parent(specs, spec) else None
        if exc.cycle:
            reason = f"{what}.parent = {spec.parent!r}: the parents form a cycle ({' -> '.join(exc.path)})"
        else:
            reason = (f"{what}.parent = {spec.parent!r}: queue {spec.name} is {len(exc.path) - 1:,} levels below "
                      f"its top-level queue {exc.path[-1]}: at most {MAX_DEPTH} (the limit)")
        raise TraceError(where, reason, line=line) from None


def _unique_parent(specs: list[QueueSpec], spec: QueueSpec) -> bool:
    """Whether the line of ``parent = spec.parent`` names this queue's entry alone."""
    return sum(1 for s in specs if s.parent == spec.parent) == 1


def _leaves_under(by_name: dict[str, QueueSpec]) -> dict[str, set[str]]:
    """The leaves below each queue, one walk up from each leaf (the depth is bounded)."""
    parents = {s.parent for s in by_name.values() if s.parent is not None}
    out: dict[str, set[str]] = {p: set() for p in parents}
    for name, spec in by_name.items():
        if name in parents:
            continue
        up = spec.parent
        while up is not None:
            out[up].add(name)
            up = by_name[up].parent if up in by_name else None
    return out


def _check_guarantee(value: Any, what: str, where: str, name: str, vcs: set[str], cluster: ClusterSpec) -> None:
    """A guarantee must be what the queue's nodes give (its VC's, or its subtree's VCs'): total
    GPUs, or GPUs per type."""
    ids = {nid for vc in vcs if vc in cluster.vcs for nid in cluster.vcs[vc].node_ids}
    by_type: dict[str, int] = {}
    for node in cluster.nodes:
        if node.node_id in ids:
            by_type[node.gpu_type.name] = by_type.get(node.gpu_type.name, 0) + node.gpus
    if isinstance(value, dict):
        given = {k: v for k, v in _by_type(value, where, f"{what}.guarantee").items() if v}
        if given != by_type:
            raise TraceError(where, f"{what}.guarantee = {given}: queue {name}'s nodes give {by_type} (a guarantee "
                                    "is the VCs' own nodes in this version)")
        return
    total = _int(value, where, f"{what}.guarantee", 0)
    if total != sum(by_type.values()):
        raise TraceError(where, f"{what}.guarantee = {total}: queue {name}'s nodes give {sum(by_type.values())} GPUs "
                                "(a guarantee is the VCs' own nodes in this version)")


def queues_to_toml(specs: tuple[QueueSpec, ...]) -> str:
    """The ``[[queues]]`` tables of ``specs`` (``cluster show`` prints them after the groups)."""
    lines: list[str] = []
    for q in specs:
        lines += ["", "[[queues]]", f"name = {_quoted(q.name)}"]
        for key, total, types in (("borrow_limit", q.borrow_limit, q.borrow_types),
                                  ("lend_limit", q.lend_limit, q.lend_types)):
            if types is not None:
                lines.append(f"{key} = {{{', '.join(f'{t} = {n}' for t, n in types)}}}")
            elif total is not None:
                lines.append(f"{key} = {total}")
        if q.parent is not None:
            lines.append(f"parent = {_quoted(q.parent)}")
        if q.weight != 1.0:
            lines.append(f"weight = {q.weight:g}")
        if q.namespaces:
            lines.append(f"namespaces = [{', '.join(_quoted(n) for n in q.namespaces)}]")
    return "\n".join(lines) + ("\n" if lines else "")


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
