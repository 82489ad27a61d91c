"""The cluster file's ``queues`` list: which VCs may borrow idle GPUs of others, and how many.

    [[queues]]
    name = "vc01"            # a VC of the file's groups (each VC is a leaf queue)
    borrow_limit = 16        # GPUs its jobs may hold on other VCs' nodes at once (absent: no limit)
    lend_limit = 8           # GPUs of its nodes other VCs' jobs may hold at once (absent: no limit)
    parent = "research"      # its cohort: only queues with the same parent lend to each other
    guarantee = 64           # optional check: its nodes' GPUs (or {V100 = 32, A100 = 32} per type)
    namespaces = ["team-a"]  # live service only: pods of these namespaces belong to this VC

The live service reads the same tables from a ConfigMap (:func:`parse_queues_text`, no cluster:
the live VCs come and go, so names and guarantees are not checked against nodes there).

A VC's guarantee is its own nodes (per GPU type), as in the Helios partition; ``guarantee`` only
checks that the file says what its groups give. A VC without an entry neither borrows nor lends.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from dlsched.core.cluster import ClusterSpec
from dlsched.kernel.quotas import QueueSpec
from dlsched.traces.cluster_file import _int, _line_of, _parse, _short, _table, read_cluster_file
from dlsched.traces.model import TraceError

QUEUE_KEYS = {"name", "borrow_limit", "lend_limit", "parent", "guarantee", "namespaces"}
NAMESPACE_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
MAX_TEXT = 1 << 20   # a ConfigMap value holds at most 1 MiB


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
    unknown = sorted(set(data) - {"queues"})
    if unknown:
        raise TraceError(where, f"unknown top-level key(s) {', '.join(unknown)}: only [[queues]] tables belong here")
    raw = data.get("queues")
    return () if raw is None else _specs(raw, where, text, None)


def _specs(raw: Any, where: str, text: str, cluster: ClusterSpec | None) -> tuple[QueueSpec, ...]:
    if not isinstance(raw, list):
        raise TraceError(where, "'queues' must be a list of tables (name, borrow_limit, lend_limit, parent)")
    specs: list[QueueSpec] = []
    seen: set[str] = set()
    for i, entry in enumerate(raw, 1):
        what = f"queues[{i}]"
        try:
            specs.append(_queue(entry, what, where, cluster, seen))
        except TraceError as exc:
            key = exc.reason.split(" ", 1)[0].removeprefix(what + ".").rstrip(":")
            value = entry.get(key) if isinstance(entry, dict) else None
            line = _line_of(text, key, value if isinstance(value, (str, int, float)) else None)
            raise (TraceError(exc.path, exc.reason, line=line) if line and key in QUEUE_KEYS else exc) from None
    return tuple(specs)


def _queue(entry: Any, what: str, where: str, cluster: ClusterSpec | None, seen: set[str]) -> QueueSpec:
    own = _table(entry, QUEUE_KEYS, where, what)
    name = own.get("name")
    if not isinstance(name, str) or not name.strip():
        raise TraceError(where, f"{what}.name = {_short(name)}: want the name of a VC of the groups")
    name = name.strip()
    if cluster is not None and name not in cluster.vcs:
        raise TraceError(where, f"{what}.name = {name!r}: no group has this VC (VCs: {', '.join(cluster.vcs)})")
    if name in seen:
        raise TraceError(where, f"{what}.name = {name!r}: the VC has two queue entries")
    seen.add(name)
    limits = {key: None if own.get(key) is None else _int(own[key], where, f"{what}.{key}", 0)
              for key in ("borrow_limit", "lend_limit")}
    parent = own.get("parent")
    if parent is not None and (not isinstance(parent, str) or not parent.strip()):
        raise TraceError(where, f"{what}.parent = {_short(parent)}: want a cohort name (text)")
    if "guarantee" in own and cluster is not None:
        _check_guarantee(own["guarantee"], what, where, name, cluster)
    namespaces = own.get("namespaces", [])
    if not isinstance(namespaces, list) or not all(isinstance(n, str) and NAMESPACE_RE.match(n) for n in namespaces):
        raise TraceError(where, f"{what}.namespaces = {_short(namespaces)}: want a list of Kubernetes namespace names")
    return QueueSpec(name, limits["borrow_limit"], limits["lend_limit"], parent.strip() if parent else None,
                     tuple(namespaces))


def _check_guarantee(value: Any, what: str, where: str, vc: str, cluster: ClusterSpec) -> None:
    """A guarantee must be what the VC's nodes give: total GPUs, or GPUs per type."""
    ids = set(cluster.vcs[vc].node_ids)
    by_type: dict[str, int] = {}
    for node in cluster.nodes:
        if node.node_id in ids:
            by_type[node.gpu_type.name] = by_type.get(node.gpu_type.name, 0) + node.gpus
    if isinstance(value, dict):
        from dlsched.core.cluster import gpu_type

        given: dict[str, int] = {}
        for key, n in value.items():
            try:
                type_name = gpu_type(str(key)).name
            except ValueError as exc:
                raise TraceError(where, f"{what}.guarantee: {exc}") from None
            given[type_name] = _int(n, where, f"{what}.guarantee.{key}", 0)
        given = {k: v for k, v in given.items() if v}
        if given != by_type:
            raise TraceError(where, f"{what}.guarantee = {given}: VC {vc}'s nodes give {by_type} (a guarantee "
                                    "is the VC's own nodes in this version)")
        return
    total = _int(value, where, f"{what}.guarantee", 0)
    if total != sum(by_type.values()):
        raise TraceError(where, f"{what}.guarantee = {total}: VC {vc}'s nodes give {sum(by_type.values())} GPUs "
                                "(a guarantee is the VC's own nodes in this version)")


def queues_to_toml(specs: tuple[QueueSpec, ...]) -> str:
    """The ``[[queues]]`` tables of ``specs`` (``cluster show`` prints them after the groups)."""
    lines: list[str] = []
    for q in specs:
        lines += ["", "[[queues]]", f"name = {_quoted(q.name)}"]
        lines += [f"{key} = {value}" for key, value in (("borrow_limit", q.borrow_limit), ("lend_limit", q.lend_limit))
                  if value is not None]
        if q.parent is not None:
            lines.append(f"parent = {_quoted(q.parent)}")
        if q.namespaces:
            lines.append(f"namespaces = [{', '.join(_quoted(n) for n in q.namespaces)}]")
    return "\n".join(lines) + ("\n" if lines else "")


def _quoted(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
