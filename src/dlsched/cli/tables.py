"""Terminal tables that never cut a number, whatever the terminal width.

Rich shrinks a table that is wider than the terminal by cutting cells with an ellipsis, so a
figure such as ``11,532.4`` becomes ``11,5…``. :func:`fit_table` lays a table out itself
before rich sees it: every whitespace-separated token holding a digit keeps its full width
(headers and words may wrap or fold); when even that does not fit, the rows are stacked into
``column  value`` pairs. :class:`FittingConsole` applies it to every table it prints, so
commands keep building plain ``rich.table.Table`` objects.
"""

from __future__ import annotations

import re
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

_DIGIT = re.compile(r"\d")
_HEADER_MIN = 7        # a header is folded, but not into slivers narrower than this
_TEXT_MIN = 8          # a text column may be narrowed to this (it wraps), never below its numbers


def _plain(cell: Any) -> str | None:
    """The text of a cell, or None for a renderable that is not text (left to rich)."""
    if isinstance(cell, str):
        from rich.errors import MarkupError

        try:
            return Text.from_markup(cell).plain
        except MarkupError:  # rich prints such a cell as it is written
            return cell
    if isinstance(cell, Text):
        return cell.plain
    return None


def _number_width(text: str) -> int:
    """Width of the longest token that holds a digit: a column must never be narrower."""
    return max((len(tok) for tok in text.split() if _DIGIT.search(tok)), default=0)


def _overhead(table: Table) -> int:
    """Characters a table uses besides its cells (edges, separators, padding)."""
    n = len(table.columns)
    pad = table.padding[1] + table.padding[3] if table.padding else 0
    edges = 2 if (table.box is not None and table.show_edge) else 0
    seps = (n - 1) if table.box is not None else 0
    return edges + seps + n * pad


def _cells(table: Table) -> list[list[str]] | None:
    """Every column's cell texts, or None when a cell is not text."""
    out: list[list[str]] = []
    for column in table.columns:
        texts = [_plain(c) for c in column._cells]
        if any(t is None for t in texts):
            return None
        out.append(texts)  # type: ignore[arg-type]
    return out


def fit_table(table: Table, width: int, transposed: bool = False) -> Table:
    """``table`` laid out for ``width`` columns with every number in full (a new table when stacked)."""
    cells = _cells(table)
    headers = [_plain(c.header) or "" for c in table.columns]
    if cells is None or not table.columns:
        return table
    natural = [max([len(line) for t in [h, *col] for line in t.splitlines()] or [1])
               for h, col in zip(headers, cells)]
    need = [max([_number_width(t) for t in [h, *col]]) for h, col in zip(headers, cells)]
    floor = [max(n, min(nat, _TEXT_MIN) if n == 0 else 0, min(len(h), _HEADER_MIN), column.min_width or 0)
             for n, nat, h, column in zip(need, natural, headers, table.columns)]  # a min_width asked for is kept
    room = width - _overhead(table)
    if sum(natural) <= room:
        for column, n in zip(table.columns, need):
            if n:
                column.no_wrap = False
                column.overflow = "fold"
                column.min_width = max(column.min_width or 0, n)
        return table
    if sum(floor) <= room:
        widths = list(floor)
        spare = room - sum(widths)
        for i in sorted(range(len(widths)), key=lambda i: natural[i] - widths[i]):  # whole headers first
            if 0 < natural[i] - widths[i] <= spare:
                spare -= natural[i] - widths[i]
                widths[i] = natural[i]
        while spare > 0:  # hand out the rest one character at a time to the column cut most
            short = [(natural[i] - widths[i], i) for i in range(len(widths)) if widths[i] < natural[i]]
            if not short:
                break
            widths[max(short)[1]] += 1
            spare -= 1
        for column, w in zip(table.columns, widths):
            column.width = w
            column.min_width = None
            column.max_width = None
            column.no_wrap = False
            column.overflow = "fold"
        return table
    if len(cells[0]) < len(headers) - 1 and not transposed:
        flipped = _transposed(table, headers, cells)
        fitted = fit_table(flipped, width, transposed=True)
        if fitted is flipped:
            return fitted
    return _stacked(table, headers, cells, width)


def _transposed(table: Table, headers: list[str], cells: list[list[str]]) -> Table:
    """Rows become columns (headed by the first column's cells): few wide rows fit better so."""
    flipped = Table(title=table.title, caption=table.caption, box=table.box, show_edge=table.show_edge,
                    padding=table.padding)
    flipped.add_column(headers[0])
    for label in cells[0]:
        flipped.add_column(label, justify="right")
    for header, col in zip(headers[1:], cells[1:]):
        flipped.add_row(header, *col)
    return flipped


def _stacked(table: Table, headers: list[str], cells: list[list[str]], width: int) -> Table:
    """One ``column  value`` pair a line, a section per row: fits any width a number fits in."""
    stacked = Table(title=table.title, caption=table.caption, show_header=False, box=table.box,
                    show_edge=table.show_edge, padding=table.padding)
    stacked.add_column(overflow="fold", style="bold")
    stacked.add_column(overflow="fold", justify="right")
    rows = len(cells[0]) if cells else 0
    for r in range(rows):
        for c, header in enumerate(headers):
            stacked.add_row(header, cells[c][r], end_section=(c == len(headers) - 1 and r < rows - 1))
    key = max((len(h) for h in headers), default=1)
    value = max((len(cells[c][r]) for c in range(len(headers)) for r in range(rows)), default=1)
    room = width - _overhead(stacked)
    if key + value > room:  # narrow the keys (they fold) before any value
        need = max((_number_width(cells[c][r]) for c in range(len(headers)) for r in range(rows)), default=1)
        value_w = max(min(value, room - min(key, _TEXT_MIN)), need)
        stacked.columns[1].width = value_w
        stacked.columns[0].width = max(1, room - value_w)
    return stacked


class FittingConsole(Console):
    """A console whose tables are fitted to its width before they are printed."""

    def print(self, *objects: Any, **kwargs: Any) -> None:
        width = kwargs.get("width") or self.width
        fitted = [fit_table(o, width) if isinstance(o, Table) else o for o in objects]
        super().print(*fitted, **kwargs)
