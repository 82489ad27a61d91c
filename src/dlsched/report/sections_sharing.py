"""Report section for a sharing experiment (``dlsched experiment horus-table6 ... --out DIR``):
our rows beside the paper's numbers, as the command printed them."""

from __future__ import annotations

import html
import math
from collections.abc import Mapping

from dlsched.report.page import Section, note
from dlsched.report.sharing_columns import column_groups
from dlsched.report.tables import render

SHARING_FILE = "sharing_experiment.json"
FRACTION_WORDS = ("gain", "util", "reduction", "share")
TITLES = {"horus-table6": "Horus Table 6: makespan and utilisation",
          "horus-table7": "Horus Table 7: waiting time (and the sensitivity to k)",
          "coscheml": "Co-scheML Fig. 7-9: JCT, makespan, speed, utilisation",
          "colocation-oracle": "Share of the co-location oracle's gain"}


def _cell(key: str, value: object) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if isinstance(value, str):
        return html.escape(value)
    if any(w in key for w in FRACTION_WORDS):
        return f"{100 * float(value):.1f} %"
    return f"{float(value):,.2f}" if abs(float(value)) < 100 else f"{float(value):,.0f}"


def _table(keys: list[str], rows: list[Mapping]) -> str:
    """One table of ``keys``; headers may wrap after an underscore (``paper_<wbr>makespan_<wbr>min``)."""
    head = "<tr>" + "".join(f"<th>{html.escape(k).replace('_', '_<wbr>')}</th>" for k in keys) + "</tr>"
    return render(keys, ([_cell(k, r.get(k)) for k in keys] for r in rows), head_html=head)


def sharing_headline(result: Mapping) -> list[tuple[str, str]]:
    seeds = result.get("seeds", [])
    return [("experiment", html.escape(str(result.get("experiment", "")))), ("seeds", str(len(seeds))),
            ("run time", f"{float(result.get('seconds', 0.0)):.0f} s")]


def sharing_sections(result: Mapping) -> list[Section]:
    """One table with every column of the rows (``paper_*`` columns are the paper's figures)."""
    rows = result.get("rows") or []
    if not rows:
        return [Section("sharing", "Sharing experiment", note(f"{SHARING_FILE} has no rows."))]
    keys = list(dict.fromkeys(k for r in rows for k in r))
    table = "".join((f"<h3>{html.escape(title)}</h3>" if title else "") + _table(cols, rows)
                    for title, cols in column_groups(keys, rows))
    settings = {k: v for k, v in result.items() if k not in ("rows", "experiment", "seconds", "pairs", "seed_rule")}
    body = table + note("Columns named paper_* quote the paper; the others are ours (mean over seeds); each table "
                        "repeats the row's key columns. "
                        "Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
    name = str(result.get("experiment", "sharing"))
    sections = [Section("sharing", TITLES.get(name, name), body)]
    if result.get("pairs"):
        sections.append(Section("sharing-pairs", "Between policies (paired per seed, Bonferroni-corrected)",
                                pairs_body(result)))
    return sections


def pairs_body(result: Mapping) -> str:
    """Every pair of ranked policies: gain difference in points, corrected CI, verdict, and the seeds
    the seed rule ran (``dlsched.experiments.sharing.pairwise``)."""
    from dlsched.experiments.sharing.pairwise import rule_text

    pairs = result["pairs"]
    group = next((k for k in ("workload", "predictions") if k in pairs[0]), None)
    heads = ([group] if group else []) + ["a", "b", "gain a - gain b (points)", "corrected CI (points)",
                                           "seeds a won", "seeds", "verdict", "seeds a verdict needs"]

    def points(v: object) -> str:
        return "–" if v is None or math.isnan(float(v)) else f"{100 * float(v):+.1f}"

    rows = ([*([html.escape(str(p[group]))] if group else []), html.escape(p["a"]), html.escape(p["b"]),
             points(p["diff"]), f"{points(p['diff_ci_low'])} .. {points(p['diff_ci_high'])}", str(p["wins_a"]),
             str(p["n"]), html.escape(p["verdict"]), html.escape(p["seeds_needed_text"])] for p in pairs)
    rules = "; ".join(f"{name + ': ' if name else ''}{rule_text(rule)}"
                      for name, rule in (result.get("seed_rule") or {}).items())
    return render(heads, rows) + note("Tied: the corrected CI spans 0. Seeds: " + html.escape(rules))
