"""How a sharing experiment's wide row table is laid out so that no column hides off to the right.

Horus Table 6 has 17 columns: at a 1,280 px page they do not fit in one table, and a scroll box
hides the paper's figures (the point of the table) past its right edge. The columns are split
into tables that each fit: first our figure beside the paper's for every ``paper_*`` column,
then our other figures; every table repeats the row's key columns (workload, policy).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

PAPER = "paper_"
MAX_COLUMNS = 9  # value columns per table besides the key columns: fits 1,280 px with wrapped headers


def key_columns(keys: Sequence[str], rows: Sequence[Mapping]) -> list[str]:
    """The leading columns that name the row (text in every row), repeated in every table."""
    out = []
    for key in keys:
        if key.startswith(PAPER) or not all(isinstance(r.get(key), str) for r in rows):
            break
        out.append(key)
    return out


def partner(paper_key: str, ours: Sequence[str]) -> str | None:
    """Our column the paper's column quotes: the same name, else the one that ends with it."""
    name = paper_key[len(PAPER):]
    if name in ours:
        return name
    return next((k for k in ours if k.endswith("_" + name)), None)


def column_groups(keys: Sequence[str], rows: Sequence[Mapping]) -> list[tuple[str, list[str]]]:
    """(title, columns) per table; together they hold every column once (key columns in each)."""
    names = key_columns(keys, rows)
    values = [k for k in keys if k not in names]
    if len(values) <= MAX_COLUMNS:
        return [("", [*names, *values])]
    ours = [k for k in values if not k.startswith(PAPER)]
    beside: list[str] = []
    for key in values:
        if key.startswith(PAPER):
            mate = partner(key, [k for k in ours if k not in beside])
            beside += [mate, key] if mate else [key]
    rest = [k for k in values if k not in beside]
    groups = [("Ours beside the paper's", beside)] if beside else []
    chunks = [rest[i:i + MAX_COLUMNS] for i in range(0, len(rest), MAX_COLUMNS)]
    groups += [("Our other figures" if beside else "Figures", chunk) for chunk in chunks]
    out = []
    for title, cols in groups:
        for i in range(0, len(cols), MAX_COLUMNS):  # a paper with very many columns splits again
            part = cols[i:i + MAX_COLUMNS]
            label = title if len(cols) <= MAX_COLUMNS else f"{title} ({i // MAX_COLUMNS + 1})"
            out.append((label, [*names, *part]))
    return out
