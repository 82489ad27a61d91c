"""Experiment drivers behind the CLI: run every policy, write ``summary.json`` and ``timeline.csv``."""

from __future__ import annotations

import csv
import json
import time
from collections.abc import Sequence
from pathlib import Path

from dlsched.topology.experiment import POLICIES, simulate, summarize, timeline_rows
from dlsched.topology.graph import machine_graph
from dlsched.topology.jobgraph import JobProfile
from dlsched.topology.scenarios import generate_jobs, prototype_jobs


def run_experiment(name: str, jobs: Sequence[JobProfile], machines: int, preset: str, out: Path,
                   policies: Sequence[str] = POLICIES, extra: dict | None = None) -> dict:
    """Simulate each policy; summary.json maps policy -> figures, plus a ``meta`` entry."""
    out.mkdir(parents=True, exist_ok=True)
    graphs = [machine_graph(preset)] * machines
    summary: dict = {}
    rows: list[dict] = []
    for pol in policies:
        t0 = time.perf_counter()
        runs = simulate(graphs, jobs, pol)
        s = summarize(runs)
        s["sim_seconds"] = round(time.perf_counter() - t0, 3)
        summary[pol] = s
        rows.extend(timeline_rows(pol, runs))
    meta = {"experiment": name, "machines": machines, "preset": preset, "jobs": len(jobs),
            "cumulative_time_definition": "sum over jobs of execution time (end - start)",
            "slowdown_definition": "mean over jobs of execution time / solo time on the best placement"}
    if "topo-aware-p" in summary:
        ref = summary["topo-aware-p"]["cumulative_time"]
        meta["speedup_of_topo_aware_p"] = {p: round(summary[p]["cumulative_time"] / ref, 4)
                                           for p in summary if p != "topo-aware-p"}
    meta.update(extra or {})
    summary["meta"] = meta
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    with open(out / "timeline.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    return summary


def prototype(out: Path) -> dict:
    """Table 1's six jobs on one Minsky (Sec. 5.2, Fig. 8)."""
    return run_experiment("topo-prototype", prototype_jobs(), 1, "minsky", out)


def scenario(name: str, jobs: int, machines: int, out: Path, seed: int = 0,
             rate_per_min: float | None = None, preset: str = "minsky") -> dict:
    """Sec. 5.5 scenarios. The arrival rate defaults to 10 jobs/min per 5 machines (scenario 1's
    load), so scenario 2 keeps the same per-machine load instead of idling 1,000 machines."""
    rate = rate_per_min if rate_per_min is not None else 10.0 * machines / 5.0
    wl = generate_jobs(jobs, rate, seed)
    return run_experiment(name, wl, machines, preset, out, extra={"rate_per_min": rate, "seed": seed})
