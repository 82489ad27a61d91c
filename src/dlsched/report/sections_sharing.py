"""Report section for a sharing experiment (``dlsched experiment horus-table6 ... --out DIR``):
our rows beside the paper's numbers, as the command printed them."""

from __future__ import annotations

import html
from collections.abc import Mapping

from dlsched.report.page import Section, note
from dlsched.report.tables import render

SHARING_FILE = "sharing_experiment.json"
FRACTION_WORDS = ("gain", "util", "reduction", "share")
TITLES = {"horus-table6": "Horus Table 6: makespan and utilisation",
          "horus-table7": "Horus Table 7: waiting time (and the sensitivity to k)",
          "coscheml": "Co-scheML Fig. 7-9: JCT, makespan, speed, utilisation",
          "colocation-oracle": "Share of the co-location oracle's gain"}


def _cell(key: str, value: object) -> str:
    if value is None or (isinstance(value, float) and value != value):
        return "–"
    if isinstance(value, str):
        return html.escape(value)
    if any(w in key for w in FRACTION_WORDS):
        return f"{100 * float(value):.1f} %"
    return f"{float(value):,.2f}" if abs(float(value)) < 100 else f"{float(value):,.0f}"


def sharing_headline(result: Mapping) -> list[tuple[str, str]]:
    seeds = result.get("seeds", [])
    return [("experiment", html.escape(str(result.get("experiment", "")))), ("seeds", str(len(seeds))),
            ("run time", f"{float(result.get('seconds', 0.0)):.0f} s")]


def sharing_sections(result: Mapping) -> list[Section]:
    """One table with every column of the rows (``paper_*`` columns are the paper's figures)."""
    rows = result.get("rows") or []
    if not rows:
        return [Section("sharing", "Sharing experiment", note(f"{SHARING_FILE} has no rows."))]
    keys = list(rows[0])
    table = render(keys, ([_cell(k, r.get(k)) for k in keys] for r in rows))
    settings = {k: v for k, v in result.items() if k not in ("rows", "experiment", "seconds")}
    body = table + note("Columns named paper_* quote the paper; the others are ours (mean over seeds). "
                        "Settings: " + ", ".join(f"{k} = {v}" for k, v in settings.items()))
    name = str(result.get("experiment", "sharing"))
    return [Section("sharing", TITLES.get(name, name), body)]
