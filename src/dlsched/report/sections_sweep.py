"""Report sections of a sweep directory (``dlsched sweep``): one plot per swept parameter, the
across-seed table, and the failed cells.

Each plot puts a figure (mean over the replicate option, 95 % CI as error bars) against one swept
parameter, with one line per combination of the other swept parameters (policy first), so "avg
JCT vs cluster size, one line per policy" is what a policy x nodes x seed sweep shows.
"""

from __future__ import annotations

import html
import json
import math
from pathlib import Path

from dlsched.report.errors import ReportError
from dlsched.report.figure import MARKERS, new_figure, style, tidy, to_data_uri
from dlsched.report.fmt import cell, label
from dlsched.report.layout import read_json, require_file
from dlsched.report.page import Section, figure, note
from dlsched.report.tables import render

PLOTTED = ("avg_jct", "avg_queue_delay", "gpu_utilization")


def load_sweep(root: Path):
    """(plan, results table, stats table) of a sweep directory; ReportError names a bad file."""
    import pandas as pd

    from dlsched.sweep.stats import seed_stats

    plan = read_json(root / "sweep.json")
    path = require_file(root / "results.parquet")
    try:
        results = pd.read_parquet(path)
    except (OSError, ValueError) as exc:
        raise ReportError(f"{path} is not a readable Parquet file: {exc}") from None
    params = list(dict.fromkeys(k for c in plan.get("cells", []) for k in c.get("params", {})))
    stats, _ = seed_stats(results, params, plan.get("replicate", "seed"), plan.get("baseline") or None)
    return plan, results, stats


def _order(values: list) -> list:
    """Numbers ascending, anything else in first-seen order."""
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        return sorted(values)
    return list(dict.fromkeys(values))


def _plot(stats, param: str, others: list[str], figures: list[str]) -> str:
    xs = _order(list(dict.fromkeys(stats[param].tolist())))
    numeric = all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in xs)
    fig = new_figure(4.2 * len(figures), 3.6)
    axes = fig.subplots(1, len(figures), squeeze=False)[0]
    groups = list(stats.groupby(others, sort=False, dropna=False)) if others else [((), stats)]
    for ax, fig_name in zip(axes, figures):
        for i, (key, group) in enumerate(groups):
            key = key if isinstance(key, tuple) else (key,)
            rows = {r[param]: r for _, r in group.iterrows()}
            points = [(x, rows[x]) for x in xs if x in rows]
            px = [x if numeric else xs.index(x) for x, _ in points]
            py = [r[f"{fig_name}.mean"] for _, r in points]
            err = [0.0 if math.isnan(r[f"{fig_name}.ci95"]) else r[f"{fig_name}.ci95"] for _, r in points]
            name = ", ".join(f"{k}={v}" for k, v in zip(others, key)) if others else fig_name
            ax.errorbar(px, py, yerr=err, marker=MARKERS[i % len(MARKERS)], capsize=3, label=name, **style(i))
        if not numeric:
            ax.set_xticks(range(len(xs)), [str(x) for x in xs])
        ax.set_xlabel(param)
        ax.set_ylabel(label(fig_name))
        tidy(ax)
    if others and len(groups) > 1:
        axes[0].legend(fontsize=8)
    return to_data_uri(fig)


def _stats_table(stats, keys: list[str], figures: list[str]) -> str:
    headers = [*keys, "n", *(label(f) for f in figures)]
    rows = []
    for _, r in stats.iterrows():
        cells = [html.escape(str(r[k])) for k in keys] + [str(r["n"])]
        for f in figures:
            text = cell(f, r[f"{f}.mean"])
            if not math.isnan(r[f"{f}.ci95"]):
                text += f" ± {cell(f, r[f'{f}.ci95'])}"
            ratio = r.get(f"{f}.ratio")
            if ratio is not None and not math.isnan(ratio):
                text += f' <span class="muted">×{ratio:.3f}</span>'
            cells.append(text)
        rows.append(cells)
    return render(headers, rows)


def sweep_sections(root: Path) -> tuple[dict[str, str], list[Section]]:
    """Header facts and sections of the sweep report."""
    plan, results, stats = load_sweep(root)
    replicate = plan.get("replicate", "seed")
    swept = [k for k in plan.get("swept", []) if k != replicate and k in stats.columns]
    figures = [f for f in PLOTTED if f"{f}.mean" in stats.columns]
    counts = results["status"].value_counts().to_dict() if "status" in results else {}
    meta = {"Cells": f"{len(results)} ({', '.join(f'{v} {k}' for k, v in counts.items())})",
            "Swept": ", ".join(plan.get("swept", [])), "Spec": str(plan.get("spec", ""))}
    sections: list[Section] = []
    if not len(stats):
        sections.append(Section("none", "No finished cells", note("No cell of this sweep has finished yet.")))
        return meta, sections
    for param in swept:
        others = sorted((k for k in swept if k != param), key=lambda k: (k != "policy", swept.index(k)))
        body = figure(_plot(stats, param, others, figures), f"{', '.join(figures)} vs {param}",
                      f"mean over {replicate} with 95 % confidence intervals; one line per "
                      + (", ".join(others) if others else "configuration"))
        sections.append(Section(f"vs-{param}", f"Figures vs {param}", body))
    base = plan.get("baseline")
    sections.append(Section("stats", "Mean ± 95 % CI over " + replicate,
                            (note(f"× = ratio to the baseline {json.dumps(base)}") if base else "")
                            + _stats_table(stats, swept, figures)))
    failed = results[results["status"] == "failed"] if "status" in results else results.iloc[0:0]
    if len(failed):
        rows = [[html.escape(r["cell"]), html.escape(str(r["error"]))] for _, r in failed.iterrows()]
        sections.append(Section("failed", f"Failed cells ({len(failed)})", render(["cell", "error"], rows)))
    return meta, sections
