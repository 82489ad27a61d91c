"""Report sections for simulated runs; a single run is treated as a comparison of one policy."""

from __future__ import annotations

import html
from collections.abc import Callable, Mapping, Sequence

from dlsched.report.energy_text import energy_sentences, units_table
from dlsched.report.figure import to_data_uri
from dlsched.report.fmt import cell
from dlsched.report.load import RunData
from dlsched.report.page import Section, figure, note
from dlsched.report.plots_runs import jct_cdf, timeline, vc_queue_delay
from dlsched.report.tables import groups_overview, groups_table, per_vc_table, summary_table
from dlsched.report.tables_queues import queues_table

CARD_KEYS = (("avg_jct", "Avg JCT"), ("avg_queue_delay", "Avg queue delay"), ("queued_jobs", "Queued jobs"),
             ("gpu_utilization", "GPU utilisation"), ("makespan", "Makespan"))


def headline(summary: Mapping) -> list[tuple[str, str]]:
    """Card items for a single run's most looked-at figures."""
    return [(name, cell(key, summary[key])) for key, name in CARD_KEYS if key in summary]


def run_sections(runs: Sequence[RunData], records: Sequence[Mapping], baseline_note: str = "") -> list[Section]:
    """All sections for one or more runs; ``records`` are the summary rows (summary.csv or summary.json)."""
    names = [run.label for run in runs]
    many = len(runs) > 1
    out = [Section("summary", "Summary", (note(baseline_note) if baseline_note else "")
                   + summary_table(names, records))]
    fig = jct_cdf(runs)
    body = figure(to_data_uri(fig), "CDF of job completion time", "Empirical CDF of JCT per policy "
                  "(finished jobs, log scale); dotted lines mark the Helios short/middle/long boundaries."
                  ) if fig else note("No finished jobs with a JCT in jobs.csv.")
    out.append(Section("jct", "JCT distribution", body))
    fig, shown, total = vc_queue_delay(runs)
    caption = f"Average queue delay per VC{' and policy' if many else ''}"
    caption += f"; the {shown} VCs with most jobs of {total}." if shown < total else "."
    out.append(Section("vc-delay", "Queue delay per VC",
                       figure(to_data_uri(fig), "Queue delay per VC", caption) if fig else note("No VCs.")))
    fig = timeline(runs)
    body = figure(to_data_uri(fig), "GPU utilisation and queue over time",
                  "Busy/total GPUs and queued jobs (time-weighted means when downsampled).") if fig else \
        note("No timeline.csv in the run folder(s).")
    out.append(Section("timeline", "Utilisation over time", body))
    out.append(Section("groups", "Job groups (Helios Table 4)", groups_body(runs, many)))
    out.append(Section("per-vc", "Per-VC metrics", per_policy(runs, per_vc_table, "No per_vc in summary.json.")))
    if any(run.summary.get("per_queue") for run in runs):
        out.append(Section("queues", "Queues (lending and borrowing)", per_policy(
            runs, queues_table, "This run's queues did not borrow (no per_queue in summary.json).")))
    if any(isinstance(run.summary.get("energy"), Mapping) for run in runs):
        out.append(Section("energy", "Energy", per_policy(
            runs, _energy_body, "")))
    return out


def _energy_body(summary: Mapping) -> str | None:
    """The run's power controller and savings as sentences, then figures with units."""
    energy = summary.get("energy")
    if not isinstance(energy, Mapping):
        return None
    return energy_sentences(energy) + units_table(energy, str(energy.get("currency", "USD")))


def groups_body(runs: Sequence[RunData], many: bool) -> str:
    """Cross-policy overview (comparisons only) followed by each policy's full group table."""
    intro = note("Short: < 15 min, middle: 15 min – 6 h, long: > 6 h of run time (Helios Table 4).")
    overview = groups_overview([r.label for r in runs], [r.summary for r in runs]) if many else None
    head = f"<h3>All policies</h3>{overview}" if overview else ""
    return intro + head + per_policy(runs, groups_table, "No groups in summary.json.")


def per_policy(runs: Sequence[RunData], make: Callable[[Mapping], str | None], empty: str) -> str:
    """One table per run: under a collapsible heading per policy when comparing, else bare."""
    parts = []
    for i, run in enumerate(runs):
        table = make(run.summary)
        if table is None:
            table = note(empty) if empty else ""
        if not table:
            continue
        if len(runs) == 1:
            parts.append(table)
        else:
            opened = " open" if i == 0 else ""
            parts.append(f"<details{opened}><summary>{html.escape(run.label)}</summary>{table}</details>")
    return "".join(parts)
