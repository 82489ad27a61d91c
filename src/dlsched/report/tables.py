"""HTML tables: the summary (metrics × policies), Helios Table 4 groups, per-VC and key/value tables.

Cells are escaped by ``fmt.cell``; numbers are right-aligned with tabular figures by the CSS.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from numbers import Real

from dlsched.report.fmt import cell, is_missing, label

METRIC_KEYS = (
    "jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct", "avg_queue_delay", "median_queue_delay",
    "p95_queue_delay", "p99_queue_delay", "queued_jobs", "makespan", "gpu_utilization", "preemptions",
)
TEXT_KEYS = ("placement", "trace")
NESTED_KEYS = ("groups", "per_vc", "energy", "policy")
GROUPS = (("short", "Short (< 15 min)"), ("middle", "Middle (15 min – 6 h)"), ("long", "Long (> 6 h)"))
GROUP_KEYS = ("jobs", "avg_jct", "median_jct", "p95_jct", "p99_jct", "avg_queue_delay",
              "median_queue_delay", "p95_queue_delay", "p99_queue_delay", "queued_jobs")
VC_KEYS = ("jobs", "avg_jct", "avg_queue_delay", "queued_jobs", "gpu_utilization")
LOWER_IS_BETTER = frozenset(k for k in METRIC_KEYS if "jct" in k or "delay" in k) | {"queued_jobs", "makespan"}


def render(headers: Sequence[str], rows: Iterable[Sequence[str]], cls: str = "",
           head_html: str | None = None) -> str:
    """A table from pre-rendered cell HTML; the first column is a row header."""
    head = head_html or "<tr>" + "".join(f"<th>{html.escape(h)}</th>" for h in headers) + "</tr>"
    body = "".join(
        "<tr>" + f'<th scope="row">{r[0]}</th>' + "".join(f"<td>{c}</td>" for c in r[1:]) + "</tr>"
        for r in rows
    )
    return f'<div class="table-wrap"><table class="{cls}"><thead>{head}</thead><tbody>{body}</tbody></table></div>'


def ordered_keys(records: Sequence[Mapping]) -> list[str]:
    """Known metrics in canonical order, then other scalar keys, then ratio_* columns."""
    present = {k for r in records for k, v in r.items() if is_scalar(v) and k not in NESTED_KEYS}
    known = [k for k in TEXT_KEYS + METRIC_KEYS if k in present]
    ratios = sorted(k for k in present if k.startswith("ratio_"))
    extra = sorted(present - set(known) - set(ratios))
    return known + extra + ratios


def is_scalar(value: object) -> bool:
    """Numbers, strings, booleans and None — what fits in a table cell."""
    return value is None or isinstance(value, (str, bool, Real))


def summary_table(names: Sequence[str], records: Sequence[Mapping]) -> str:
    """Metrics as rows and policies as columns; the best policy per lower-is-better metric is bold."""
    rows = []
    for key in ordered_keys(records):
        values = [r.get(key) for r in records]
        best = best_index(key, values) if len(records) > 1 else None
        cells = []
        for i, v in enumerate(values):
            text = cell(key, v)
            if key.startswith("ratio_") and isinstance(v, Real) and not is_missing(v):
                cls = "good" if v < 1 - 1e-9 else "bad" if v > 1 + 1e-9 else ""
                text = f'<span class="{cls}">{text}</span>' if cls else text
            cells.append(f"<strong>{text}</strong>" if i == best else text)
        rows.append([html.escape(label(key))] + cells)
    return render(["Metric", *names], rows, cls="summary")


def best_index(key: str, values: Sequence[object]) -> int | None:
    """Index of the smallest value for metrics where lower is better (None if not comparable)."""
    if key not in LOWER_IS_BETTER:
        return None
    nums = [float(v) if isinstance(v, Real) and not is_missing(v) else math.inf for v in values]
    low = min(nums)
    return nums.index(low) if math.isfinite(low) and nums.count(low) == 1 else None


def groups_table(summary: Mapping) -> str | None:
    """Helios Table 4 for one run: rows short/middle/long/all, columns the group metrics."""
    groups = summary.get("groups")
    if not isinstance(groups, Mapping) or not groups:
        return None
    records = [(name, groups.get(key)) for key, name in GROUPS if isinstance(groups.get(key), Mapping)]
    records.append(("All jobs", summary))
    keys = [k for k in GROUP_KEYS if any(k in r for _, r in records[:-1])]
    rows = [[html.escape(name)] + [cell(k, r.get(k)) for k in keys] for name, r in records]
    return render(["Group", *(label(k) for k in keys)], rows, cls="groups")


def groups_overview(names: Sequence[str], summaries: Sequence[Mapping]) -> str | None:
    """Table 4 across policies: per group the avg JCT and avg queue delay, one row per policy."""
    if not any(isinstance(s.get("groups"), Mapping) for s in summaries):
        return None
    keys = ("avg_jct", "avg_queue_delay")
    top = '<tr><th rowspan="2">Policy</th>' + "".join(
        f'<th colspan="{len(keys)}" class="group">{html.escape(name)}</th>' for _, name in GROUPS) + "</tr>"
    sub = "<tr>" + "".join(f"<th>{html.escape(label(k))}</th>" for _ in GROUPS for k in keys) + "</tr>"
    rows = []
    for name, summary in zip(names, summaries):
        groups = summary.get("groups") if isinstance(summary.get("groups"), Mapping) else {}
        row = [html.escape(name)]
        for gkey, _ in GROUPS:
            group = groups.get(gkey) if isinstance(groups.get(gkey), Mapping) else {}
            row += [cell(k, group.get(k)) for k in keys]
        rows.append(row)
    return render([], rows, cls="groups", head_html=top + sub)


def per_vc_table(summary: Mapping) -> str | None:
    """One row per VC (most jobs first) with the per_vc metrics of summary.json."""
    per_vc = summary.get("per_vc")
    if not isinstance(per_vc, Mapping) or not per_vc:
        return None
    items = [(str(vc), m) for vc, m in per_vc.items() if isinstance(m, Mapping)]
    items.sort(key=lambda item: -jobs_of(item[1]))
    present = {k for _, m in items for k, v in m.items() if is_scalar(v)}
    keys = [k for k in VC_KEYS if k in present] + sorted(present - set(VC_KEYS))
    rows = [[html.escape(vc)] + [cell(k, m.get(k)) for k in keys] for vc, m in items]
    return render(["VC", *(label(k) for k in keys)], rows, cls="per-vc")


def jobs_of(metrics: Mapping) -> float:
    """Job count of a per-VC entry for sorting (0 when absent or not a number)."""
    jobs = metrics.get("jobs")
    return float(jobs) if isinstance(jobs, Real) and not is_missing(jobs) else 0.0


def flatten(data: Mapping, prefix: str = "") -> dict[str, object]:
    """Nested dicts to dotted keys, keeping scalars only (lists are summarised by length)."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping):
            out.update(flatten(value, f"{name}."))
        elif is_scalar(value):
            out[name] = value
        elif isinstance(value, (list, tuple)):
            out[name] = f"[{len(value)} items]"
    return out


def kv_table(data: Mapping, skip: Iterable[str] = ()) -> str:
    """Two-column key/value table of every scalar in ``data`` (nested keys dotted)."""
    skipped = set(skip)
    rows = [[html.escape(label(k)), cell(k.rsplit(".", 1)[-1], v)]
            for k, v in flatten(data).items() if k.split(".", 1)[0] not in skipped]
    return render(["Figure", "Value"], rows, cls="kv")
