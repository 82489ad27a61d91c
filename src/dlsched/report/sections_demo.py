"""Report section for ``dlsched demo``'s GPU-sharing comparison (``DIR/sharing.json``), so that
the report shows the same numbers the terminal printed."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path

from dlsched.report.errors import ReportError
from dlsched.report.layout import read_json
from dlsched.report.page import Section, note
from dlsched.report.tables import render

DEMO_SHARING_FILE = "sharing.json"
COLUMNS = (("makespan", "makespan (s)"), ("avg_jct", "avg JCT (s)"),
           ("delivered_gpu_utilization", "delivered util"), ("busy_gpu_utilization", "busy GPUs"))


def _cell(key: str, value: object) -> str:
    """Seconds as whole numbers, utilisations as percentages (as the terminal table prints them)."""
    if not isinstance(value, (int, float)):
        return "–"
    return f"{float(value):.1%}" if key.endswith("utilization") else f"{float(value):,.0f}"


def demo_sharing_sections(root: Path) -> list[Section]:
    """The sharing table of a demo directory, or nothing when the demo ran ``--no-sharing``."""
    path = root / DEMO_SHARING_FILE
    if not path.is_file():
        return []
    doc = read_json(path)
    rows = doc.get("policies")
    if not isinstance(rows, Mapping) or not rows:
        raise ReportError(f"{path}: no 'policies' object (written by `dlsched demo`)")
    headers = ["policy", *(title for _, title in COLUMNS)]
    table = render(headers, ([html.escape(str(label)), *(_cell(k, row.get(k)) for k, _ in COLUMNS)]
                             for label, row in rows.items()))
    seeds = doc.get("seeds") or []
    seed_txt = f"mean of seeds {seeds[0]}-{seeds[-1]}" if seeds else "seeds not recorded"
    body = table + note(f"Workload {doc.get('workload', '?')} (24 jobs, 3 x 1 Titan Xp), built-in Gavel-derived "
                        f"truth, up to 2 jobs per GPU, {seed_txt}; the same workload and truth as "
                        "`dlsched experiment colocation-oracle` (docs/sharing-policies.md).")
    return [Section("demo-sharing", "GPU sharing (demo)", body)]
