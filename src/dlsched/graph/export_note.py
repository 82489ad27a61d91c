"""The words said before a long or large zoo export, shared by ``predict`` and ``--predict-resources``.

The exporter reports the module's size before tracing (:func:`dlsched.graph.export.on_export`);
an export of at least ``DLSCHED_EXPORT_NOTE_PARAMS`` parameters (default :data:`NOTE_PARAMS`) is
announced with its rough cost, whichever command triggered it, so that minutes of tracing never
look like a hang. Kept free of the CLI so that the run layer can say it through its ``say``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from dlsched.graph.export import ExportPlan

#: exports of this many parameters or more get the note (~18 s and ~1.2 GB by the export's estimate)
NOTE_PARAMS = 50_000_000
NOTE_ENV = "DLSCHED_EXPORT_NOTE_PARAMS"


def note_threshold() -> int:
    """The parameter count from which an export is announced: ``$DLSCHED_EXPORT_NOTE_PARAMS`` or the
    default. A value that is no whole number >= 0 is a ValueError naming the variable."""
    text = os.environ.get(NOTE_ENV, "").strip()
    if not text:
        return NOTE_PARAMS
    try:
        value = int(text.replace("_", ""))
    except ValueError:
        value = -1
    if value < 0:
        raise ValueError(f"{NOTE_ENV}={text!r}: expected a whole number of parameters (0 announces every export)")
    return value


def duration(seconds: float) -> str:
    """``~N s`` below a minute and a half, else ``~N min``."""
    return f"~{seconds:.0f} s" if seconds < 90 else f"~{seconds / 60:.0f} min"


def _count(params: int) -> str:
    return f"{params / 1e6:,.1f} M" if params >= 1e6 else f"{params:,}"


def _size(nbytes: float, binary: bool) -> str:
    (big, big_unit), (small, small_unit) = ((2**30, "GiB"), (2**20, "MiB")) if binary else ((1e9, "GB"), (1e6, "MB"))
    return f"{nbytes / big:.1f} {big_unit}" if nbytes >= big else f"{nbytes / small:.0f} {small_unit}"


def plan_note(name: str, plan: ExportPlan, cache: Path) -> str:
    """The ``note:`` line for an export of zoo model ``name`` described by ``plan``."""
    return (f"note: exporting zoo model {name} to ONNX ({plan.module}, {_count(plan.params)} parameters, "
            f"{_size(plan.param_bytes, True)} of weights) takes {duration(plan.seconds)} and "
            f"~{_size(plan.peak_bytes, False)} of memory on CPU, once: the graph is cached in {cache} "
            f"(DLSCHED_CACHE moves the cache)")
