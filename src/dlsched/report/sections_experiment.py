"""Sections for a topology experiment directory (``dlsched experiment topo-*``): per-policy
metrics side by side, and the per-job records the experiment wrote (first rows only)."""

from __future__ import annotations

import csv
import html
from pathlib import Path

from dlsched.report.page import Section, note
from dlsched.report.tables import render, summary_table

MAX_JOB_ROWS = 200  # a 10,000-job scenario would make a page nobody reads
JOB_COLUMNS = ("policy", "job", "model", "gpus_requested", "wait", "exec_time", "solo_time", "slowdown",
               "utility", "gpus")


def experiment_sections(root: Path, summary: dict) -> list[Section]:
    """Policies as columns (best per metric in bold), then the per-job table."""
    names = [k for k in summary if k != "meta" and isinstance(summary[k], dict)]
    records = [summary[n] for n in names]
    meta = summary.get("meta", {})
    sections = [Section("policies", "Policies", summary_table(names, records))]
    speedup = meta.get("speedup_of_topo_aware_p")
    if isinstance(speedup, dict) and speedup:
        text = ", ".join(f"{k} {v:.2f}×" for k, v in speedup.items())
        sections[0].body += note(f"TOPO-AWARE-P's speed-up in cumulative time over: {text}.")
    rows_file = root / "timeline.csv"
    if rows_file.is_file():
        with open(rows_file, newline="", encoding="utf-8") as fh:
            reader = csv.DictReader(fh)
            cols = [c for c in JOB_COLUMNS if c in (reader.fieldnames or [])]
            rows = [[html.escape(r.get(c, "")) for c in cols] for _, r in zip(range(MAX_JOB_ROWS), reader)]
            more = sum(1 for _ in reader)
        body = render(cols, rows, cls="jobs")
        if more:
            body += note(f"First {MAX_JOB_ROWS} job records shown; {more:,} more in {rows_file.name}.")
        sections.append(Section("jobs", "Jobs", body))
    return sections
