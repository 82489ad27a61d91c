"""The longest sequence a graph's learnt position table allows.

A transformer with learnt positions (BERT, GPT-2, ViT) looks its position embeddings up with
indices made from the sequence length (``arange(seq)``: a Range, or a slice of a stored
``position_ids`` buffer), not from the input tokens; the table has one row per position, so a
longer sequence than its rows cannot run (PyTorch raises an index error). Token embeddings (indices
from a graph input) and small type tables (indices from a constant) are not position tables."""

from __future__ import annotations

from pathlib import Path

import onnx

#: a position table has at least this many rows (token-type tables have 2)
MIN_POSITIONS = 16
_PASS = frozenset(["Unsqueeze", "Squeeze", "Expand", "Cast", "Reshape", "Add", "Identity", "Slice", "Range"])


def max_positions(path: str | Path) -> int | None:
    """Rows of the smallest position table of the ONNX graph at ``path``, or None without one."""
    proto = onnx.load(str(path), load_external_data=False)
    g = proto.graph
    dims = {i.name: list(i.dims) for i in g.initializer}
    inputs = {i.name for i in g.input}
    producer = {o: n for n in g.node for o in n.output}
    found: list[int] = []
    for n in g.node:
        if n.op_type != "Gather" or len(n.input) < 2 or n.input[0] not in dims:
            continue
        rows = dims[n.input[0]][0] if dims[n.input[0]] else 0
        if rows < MIN_POSITIONS:
            continue
        frontier, positional = [n.input[1]], False
        for _ in range(8):   # back from the indices through shape plumbing
            nxt = []
            for t in frontier:
                if t in inputs:
                    frontier = []
                    positional = False
                    break
                p = producer.get(t)
                if p is None:
                    continue
                if p.op_type in ("Range", "Slice"):
                    positional = True
                if p.op_type in _PASS:
                    nxt.extend(i for i in p.input[:1] if i)
            else:
                frontier = nxt
                continue
            break
        if positional:
            found.append(int(rows))
    return min(found) if found else None


__all__ = ["max_positions"]
