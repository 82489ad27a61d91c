"""What a reproduction is: a named paper result, the data it needs, and a run that returns tables
with our figures beside the published (or reference-run) ones.

A reproduction is one small class in its own module plus one line in ``registry.py``. ``run``
gets a :class:`Context` (where the shared data is, a scratch folder for run outputs) and returns
:class:`Table` objects whose columns say which numbers are ours and which are the paper's.
"""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import ClassVar

# a value with no counterpart (e.g. the paper gives no figure for a baseline)
NA = None


@dataclass(slots=True)
class Table:
    """One printed table: ``rows`` are lists of cells in ``columns`` order."""

    title: str
    columns: list[str]
    rows: list[list[object]]
    note: str = ""


@dataclass(slots=True)
class Result:
    """What ``dlsched reproduce NAME`` prints, writes as JSON and renders as HTML."""

    name: str
    title: str
    paper: str
    command: str
    tables: list[Table]
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass(slots=True)
class Context:
    """Where the shared data lives and where runs may write (a scratch folder unless --out)."""

    shared: Path
    work: Path

    def data(self, relative: str) -> Path:
        return self.shared / relative


def default_shared() -> Path:
    """``$DLSCHED_SHARED``, else ``../shared`` seen from the working directory (the README's layout)."""
    return Path(os.environ.get("DLSCHED_SHARED", "../shared"))


class Reproduction:
    """Base class: subclasses set the class attributes and implement :meth:`run`."""

    name: ClassVar[str]
    title: ClassVar[str]
    paper: ClassVar[str]                 # the publication and the table/figure reproduced
    command: ClassVar[str]               # the dlsched command(s) that compute our side
    needs: ClassVar[tuple[str, ...]] = ()  # files under the shared folder

    def missing(self, ctx: Context) -> list[Path]:
        return [ctx.data(p) for p in self.needs if not ctx.data(p).is_file()]

    def run(self, ctx: Context) -> tuple[list[Table], list[str]]:  # pragma: no cover - abstract
        """The tables (ours beside the paper's) and notes on how they differ."""
        raise NotImplementedError
