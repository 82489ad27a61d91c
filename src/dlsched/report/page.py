"""The HTML page: header, table of contents, sections and an inline stylesheet.

Everything is inline (CSS, base64 images) so the report is one file that can be mailed or archived.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

CSS = """
:root { --fg:#1d2330; --muted:#6b7280; --line:#e3e6ec; --bg:#ffffff; --soft:#f6f7f9; --accent:#2456a6; }
* { box-sizing: border-box; }
body { margin:0; font:15px/1.5 -apple-system, "Segoe UI", Roboto, Helvetica, Arial, sans-serif;
       color:var(--fg); background:var(--bg); }
header { padding:24px 32px 16px; border-bottom:1px solid var(--line); background:var(--soft); }
header h1 { margin:0 0 6px; font-size:22px; }
header .kind { color:var(--muted); font-size:13px; text-transform:uppercase; letter-spacing:.06em; }
dl.meta { display:flex; flex-wrap:wrap; gap:4px 24px; margin:10px 0 0; }
dl.meta div { display:flex; gap:6px; } dl.meta dt { color:var(--muted); } dl.meta dd { margin:0; font-weight:600; }
nav { padding:10px 32px; border-bottom:1px solid var(--line); font-size:14px; }
nav a { color:var(--accent); text-decoration:none; margin-right:18px; }
main { padding:8px 32px 40px; max-width:1200px; min-width:0; }
/* nothing may widen the page past the window (1,400 px and less): long paths and names break,
   wide tables scroll inside their own box and their headers wrap */
p, dd, dt, figcaption, summary, h1, h2, h3, code, footer, nav a { overflow-wrap:anywhere; }
nav a { display:inline-block; }
dl.meta div { min-width:0; flex-wrap:wrap; } pre { max-width:100%; overflow-x:auto; }
section { margin-top:28px; }
h2 { font-size:18px; margin:0 0 10px; padding-bottom:4px; border-bottom:2px solid var(--line); }
h3 { font-size:15px; margin:18px 0 6px; }
p.note { color:var(--muted); font-size:13px; margin:4px 0 10px; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin:16px 0 0; }
.card { border:1px solid var(--line); border-radius:8px; padding:10px 14px; min-width:150px; background:#fff; }
.card .v { font-size:20px; font-weight:600; } .card .k { color:var(--muted); font-size:12px; }
figure { margin:8px 0 0; } figure img { max-width:100%; height:auto; border:1px solid var(--line); border-radius:6px; }
figcaption { color:var(--muted); font-size:13px; margin-top:4px; }
.table-wrap { overflow-x:auto; max-width:100%; margin:6px 0 12px; }
table { border-collapse:collapse; font-size:13.5px; font-variant-numeric:tabular-nums; }
th, td { padding:5px 12px; border-bottom:1px solid var(--line); white-space:nowrap; }
thead th { background:var(--soft); text-align:center; font-weight:600; border-bottom:2px solid var(--line);
           white-space:normal; min-width:4.5em; max-width:13em; vertical-align:bottom; }
th code, td code { overflow-wrap:normal; }
tbody th { text-align:left; font-weight:600; } td { text-align:right; }
tbody tr:hover { background:#fafbfc; }
th.group { border-left:1px solid var(--line); }
/* the widest run tables (Table 4 groups, per VC, the queue tree) fit a 1,280 px page: tighter cells,
   and a duration's readable hint goes under its seconds instead of beside them */
table.groups th, table.groups td, table.per-vc th, table.per-vc td, table.queues th, table.queues td {
  padding:5px 7px; }
table.groups td .muted, table.per-vc td .muted, table.queues td .muted { display:block; }
.muted { color:var(--muted); font-size:12px; } .good { color:#17803d; } .bad { color:#b42318; }
details { margin:6px 0; } summary { cursor:pointer; font-weight:600; margin:6px 0; }
footer { color:var(--muted); font-size:12px; padding:12px 32px; border-top:1px solid var(--line); }
"""


@dataclass
class Section:
    """One titled part of the report; ``anchor`` links it from the table of contents."""

    anchor: str
    title: str
    body: str


def figure(uri: str, alt: str, caption: str = "") -> str:
    """An embedded PNG with alt text and an optional caption."""
    cap = f"<figcaption>{html.escape(caption)}</figcaption>" if caption else ""
    return f'<figure><img src="{uri}" alt="{html.escape(alt)}">{cap}</figure>'


def note(text: str) -> str:
    """A muted explanatory paragraph."""
    return f'<p class="note">{html.escape(text)}</p>'


def cards(items: Sequence[tuple[str, str]]) -> str:
    """Headline figures as small cards: (label, already-rendered value HTML)."""
    body = "".join(f'<div class="card"><div class="v">{v}</div><div class="k">{html.escape(k)}</div></div>'
                   for k, v in items)
    return f'<div class="cards">{body}</div>' if items else ""


def render_page(title: str, kind: str, meta: Mapping[str, str], head_extra: str,
                sections: Sequence[Section], footer: str) -> str:
    """The complete self-contained HTML document."""
    meta_html = "".join(f"<div><dt>{html.escape(k)}</dt><dd>{html.escape(v)}</dd></div>"
                        for k, v in meta.items() if v)
    nav = "".join(f'<a href="#{s.anchor}">{html.escape(s.title)}</a>' for s in sections)
    body = "".join(f'<section id="{s.anchor}"><h2>{html.escape(s.title)}</h2>{s.body}</section>'
                   for s in sections)
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{CSS}</style></head><body>"
        f'<header><div class="kind">{html.escape(kind)}</div><h1>{html.escape(title)}</h1>'
        f'<dl class="meta">{meta_html}</dl>{head_extra}</header>'
        f"<nav>{nav}</nav><main>{body}</main><footer>{html.escape(footer)}</footer></body></html>\n"
    )
