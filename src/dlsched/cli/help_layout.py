"""``--help`` that stays whole at 80 columns (issue 37).

Typer draws a command's options as a rich table whose columns cut what does not fit with ``…``:
at 80 columns ``serve --help`` showed ``--gang-permit-ti…`` and ``simulate --help``
``consolidate|first-fit|…|spr…``, and rich markup ate the brackets of ``[[queues]]``. Typer
offers no setting for either, so :func:`install` adjusts its help renderer once, at start-up:

* the option names never wrap or shrink (a ``--no-`` form goes on its own line under its
  option), the metavar and help columns wrap instead, and a word too long for its column is
  folded onto the next line instead of cut;
* a choice list ``a|b|c`` (and ``x,y`` between names) is written ``a | b | c`` so that it
  wraps between choices, never inside one;
* a TOML table header ``[[name]]`` is escaped, so rich shows it instead of reading it as markup.
"""

from __future__ import annotations

import re
from typing import Any

_CHOICE_BAR = re.compile(r"(?<=[\w.)-])\|(?=[\w.(-])")
_NAME_COMMA = re.compile(r"(?<=[a-z_]),(?=[a-z_])")
_TOML_TABLE = re.compile(r"\[\[([\w.-]+)\]\]")


def breakable(text: str) -> str:
    """``text`` with choice lists spaced (``a | b``) and ``[[tables]]`` escaped for rich markup."""
    text = _CHOICE_BAR.sub(" | ", text)
    text = _NAME_COMMA.sub(", ", text)
    return _TOML_TABLE.sub(r"\\[\\[\1]]", text)


def install() -> bool:
    """Adjust Typer's rich help renderer (idempotent); False when this Typer has no such renderer."""
    try:
        from typer import rich_utils
    except ImportError:  # Typer without rich: click's plain help, which cuts nothing
        return False
    if getattr(rich_utils, "_dlsched_help_layout", False):
        return True
    make_text = getattr(rich_utils, "_make_rich_text", None)
    table = getattr(rich_utils, "Table", None)
    if make_text is None or table is None or not hasattr(rich_utils, "Columns"):
        return False

    def _make_rich_text(*, text: str, style: str = "", markup_mode: Any) -> Any:
        if markup_mode == getattr(rich_utils, "MARKUP_MODE_RICH", "rich"):
            text = breakable(text)
        return make_text(text=text, style=style, markup_mode=markup_mode)

    from rich.text import Text

    class HelpTable(table):
        """Options and commands tables: the names column keeps its width (an option's ``--no-``
        form goes on a line of its own under it), the metavar and help columns wrap."""

        def add_row(self, *renderables: Any, **kwargs: Any) -> None:
            cells = list(renderables)
            if len(cells) in (6, 7) and all(isinstance(c, Text) for c in cells[-6:-1]):
                # Typer's options row: [required,] long, short, --no- long, --no- short, metavar, help
                lead, (long_, short, neg_long, neg_short, types, help_) = cells[:-6], cells[-6:]
                lines = [Text(" ").join(t for t in pair if t.plain) for pair in ((long_, short), (neg_long, neg_short))]
                cells = [*lead, Text("\n").join(line for line in lines if line.plain), types, help_]
            if not self.columns:
                for i in range(len(cells)):
                    wraps = i >= len(cells) - (2 if len(cells) > 2 else 1)   # metavar and help, or help
                    self.add_column(no_wrap=not wraps, overflow="fold")
            super().add_row(*cells, **kwargs)

    class HelpColumns(rich_utils.Columns):
        """A help cell's parts (text, default, envvar): a long word folds instead of being cut."""

        def __init__(self, renderables: Any = None, *args: Any, **kwargs: Any) -> None:
            for part in renderables or ():
                if isinstance(part, Text):
                    part.overflow = "fold"
            super().__init__(renderables, *args, **kwargs)

    rich_utils._make_rich_text = _make_rich_text
    rich_utils.Table = HelpTable
    rich_utils.Columns = HelpColumns
    rich_utils._dlsched_help_layout = True
    return True
