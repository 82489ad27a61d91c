"""The sweep directory: the plan, one folder per cell with an atomic completion marker, the event
log and ``results.parquet``.

Layout::

    DIR/sweep.json          the expanded plan (cells, swept keys, baseline) of the latest run
    DIR/cells/<id>/         the cell's jobs.csv, summary.json, timeline.csv
    DIR/cells/<id>/done.json    written last (temporary file + rename): the cell is finished
    DIR/cells/<id>/failed.json  the cell raised; it is retried when the sweep is run again
    DIR/events.jsonl        one line per cell start / done / failed (which run, host, seconds)
    DIR/results.parquet     one row per cell: parameters, every summary figure, wall_s, peak_rss_mib

A cell counts as finished only when ``done.json`` exists, so a sweep killed at any moment resumes
by re-running exactly the cells without it.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

from dlsched.sweep.cell import Outcome
from dlsched.sweep.options import lookup
from dlsched.sweep.spec import Cell, Spec

DONE, FAILED = "done.json", "failed.json"
RESULTS = "results.parquet"
PLAN = "sweep.json"
EVENTS = "events.jsonl"


def write_atomic(path: Path, text: str) -> None:
    """Write ``text`` so that readers see the old file or the whole new one, never a part."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def flatten(data: dict, prefix: str = "") -> dict[str, object]:
    """Nested summary -> ``{"groups.short.avg_jct": ...}``; lists become JSON text."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = json.dumps(value, default=str)
        else:
            out[name] = value
    return out


class SweepStore:
    """Reads and writes one sweep directory."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.cells_dir = self.root / "cells"
        self.run_id = time.strftime("%Y%m%dT%H%M%S") + f"-{os.getpid()}"

    def cell_dir(self, cell_id: str) -> Path:
        return self.cells_dir / cell_id

    def write_plan(self, spec: Spec) -> None:
        self.cells_dir.mkdir(parents=True, exist_ok=True)
        plan = {"spec": str(spec.path), "swept": spec.swept, "baseline": spec.baseline,
                "replicate": spec.replicate, "duplicates": spec.duplicates,
                "cells": [{"id": c.id, "params": c.params} for c in spec.cells]}
        write_atomic(self.root / PLAN, json.dumps(plan, indent=2, default=str) + "\n")

    def read_plan(self) -> dict:
        return json.loads((self.root / PLAN).read_text(encoding="utf-8"))

    def is_done(self, cell_id: str) -> bool:
        return (self.cell_dir(cell_id) / DONE).is_file()

    def prepare(self, cell_id: str) -> Path:
        """An empty folder for a cell about to run (what a killed earlier attempt left is removed)."""
        folder = self.cell_dir(cell_id)
        if folder.exists():
            shutil.rmtree(folder)
        folder.mkdir(parents=True)
        return folder

    def log(self, event: str, cell_id: str, **extra) -> None:
        line = json.dumps({"t": round(time.time(), 3), "run": self.run_id, "event": event, "cell": cell_id,
                           **extra}, default=str)
        with open(self.root / EVENTS, "a", encoding="utf-8") as f:
            f.write(line + "\n")

    def record(self, cell: Cell, outcome: Outcome, files: dict[str, bytes] | None = None) -> None:
        """Store a finished cell: its files (when they came back from elsewhere), then the marker."""
        folder = self.cell_dir(cell.id)
        folder.mkdir(parents=True, exist_ok=True)
        for name, data in (files or {}).items():
            (folder / name).write_bytes(data)
        body = {"id": cell.id, "params": cell.params, "wall_s": round(outcome.wall_s, 4),
                "peak_rss_mib": outcome.peak_rss_mib, "host": outcome.host, "run": self.run_id}
        if outcome.error is None:
            (folder / FAILED).unlink(missing_ok=True)
            write_atomic(folder / DONE, json.dumps({**body, "summary": outcome.summary}, default=str) + "\n")
            self.log("done", cell.id, wall_s=round(outcome.wall_s, 4), host=outcome.host)
        else:
            write_atomic(folder / FAILED, json.dumps({**body, "error": outcome.error}, default=str) + "\n")
            self.log("failed", cell.id, error=outcome.error, host=outcome.host)

    def results(self, spec: Spec):
        """One row per planned cell with parameters (defaults filled), status, error, figures."""
        import pandas as pd

        keys = list(dict.fromkeys(k for c in spec.cells for k in c.params))
        rows = []
        for cell in spec.cells:
            row: dict[str, object] = {"cell": cell.id}
            row.update({k: cell.params.get(k, lookup(k).default) for k in keys})
            folder = self.cell_dir(cell.id)
            if (folder / DONE).is_file():
                record = json.loads((folder / DONE).read_text(encoding="utf-8"))
                row.update(status="done", error=None)
                figures = flatten(record.get("summary") or {})
            elif (folder / FAILED).is_file():
                record = json.loads((folder / FAILED).read_text(encoding="utf-8"))
                row.update(status="failed", error=record.get("error"))
                figures = {}
            else:
                row.update(status="pending", error=None)
                rows.append(row)
                continue
            row.update(wall_s=record.get("wall_s"), peak_rss_mib=record.get("peak_rss_mib"))
            for name, value in figures.items():
                row[f"summary.{name}" if name in row else name] = value
            rows.append(row)
        frame = pd.DataFrame(rows)
        for column in frame.columns:  # mixed types (e.g. None and text) would stop pyarrow
            if frame[column].dtype == object and frame[column].map(type).nunique() > 1:
                non_null = frame[column].dropna()
                if not non_null.map(lambda x: isinstance(x, (int, float)) and not isinstance(x, bool)).all():
                    frame[column] = frame[column].map(lambda x: None if x is None else str(x))
        return frame

    def write_results(self, spec: Spec):
        frame = self.results(spec)
        tmp = self.root / f".{RESULTS}.tmp"
        frame.to_parquet(tmp, index=False)
        os.replace(tmp, self.root / RESULTS)
        return frame
