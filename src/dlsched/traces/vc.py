"""VC-size files: VC -> number of nodes.

Two layouts exist: HeliosArtifact's ``vc,node num`` (e.g. ``philly_vc_config.csv``) and Lucid's
pandas-index style ``,num``. Any two-column CSV whose first column names the VC and whose second
is a positive integer node count is accepted; VC ids stay strings (``6214e9``, ``103959``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dlsched.traces._table import parse_float, read_table
from dlsched.traces.cluster_file import MAX_NODES
from dlsched.traces.model import TraceError


def load_vc_config(path: str | Path) -> dict[str, int]:
    """Read a VC-size file, validating positive integer sizes and unique VC names."""
    table = read_table(path)
    columns = table.names
    if len(columns) < 2:
        raise TraceError(str(path), f"want two columns (vc, node count), header has: {', '.join(columns)}",
                         line=1)
    vc_col, num_col = columns[0], columns[1]
    sizes: dict[str, int] = {}
    total = 0
    vcs, nums = table.text(vc_col), table.text(num_col)
    values = parse_float(nums)
    for vc, raw, num, line in zip(vcs, nums, values, table.lines):
        vc = vc.strip()
        if not vc:
            raise TraceError(str(path), "empty VC name", int(line), vc_col or "(index)")
        if np.isnan(num) or num != int(num) or num <= 0:
            raise TraceError(str(path), f"node count must be a positive integer: {raw!r}", int(line),
                             num_col)
        if vc in sizes:
            raise TraceError(str(path), f"duplicate VC {vc!r}", int(line), vc_col or "(index)")
        total += int(num)
        if total > MAX_NODES:   # bounded before any cluster is built from it
            raise TraceError(str(path), f"node count {raw!r}: the file describes more than {MAX_NODES:,} nodes "
                                        "in all (the limit, as for a cluster file)", int(line), num_col)
        sizes[vc] = int(num)
    if not sizes:
        raise TraceError(str(path), "no VCs in file")
    return sizes
